"""One round of tool calls: read tools run now, write calls become proposals with cards.

The assistant message with its `tool_calls` and exactly one `tool` message per call are stored
in call order in one transaction, with the proposals, so a crash never leaves a call without
its answer; the cards are posted after that transaction commits.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from sqlalchemy.ext.asyncio import AsyncSession

from bot.approvals.escalation import expiry_with, ladder
from bot.approvals.questions import record_ruling
from bot.approvals.ruling import Question, Ruling, Step
from bot.audience import narrowest
from bot.conversation.private_reply import TurnAudience
from bot.conversation.round_rulings import decide, denied, screen_reads
from bot.conversation.sources import proposal_sources
from bot.conversation.tool_calls import prepare_calls, stored_result
from bot.db import repositories as repo
from bot.db.models import Conversation, Grant, Role
from bot.db.session import Database
from bot.durations import parse_duration
from bot.llm import Finished
from bot.policy.one_door import OneDoor
from bot.slack.streamer import ReplyStream
from bot.tools.catalog import ToolRegistry
from bot.tools.registry import ToolContext

if TYPE_CHECKING:
    from bot.approvals.policy import Policies
    from bot.approvals.service import ApprovalsService
    from bot.conversation.turn_settings import TurnSettings
    from bot.slack.card_publisher import CardPublisher

OnStored = Callable[[AsyncSession], Awaitable[None]]


@dataclass
class ActionDesk:
    """Where write calls go: the tools, who approves them, the service and the cards."""

    registry: ToolRegistry
    policies: Policies
    approvals: ApprovalsService
    cards: CardPublisher
    door: OneDoor | None = None  # decides every call that may not just run (`bot.policy.one_door`)
    execute: Callable[[int], None] | None = None  # runs a proposal a rule allowed


class Once:
    """Runs a hook in the first transaction that stores part of a reply, and only there."""

    def __init__(self, hook: OnStored | None) -> None:
        self.hook = hook
        self.done = False

    @property
    def pending(self) -> bool:
        """A hook is still to run (not safe to run twice: keep it out of `Database.group`)."""
        return self.hook is not None and not self.done

    async def __call__(self, session: AsyncSession) -> None:
        if not self.done:
            self.done = True
            if self.hook is not None:
                await self.hook(session)


async def tool_round(
    desk: ActionDesk,
    db: Database,
    settings: TurnSettings,
    conversation: Conversation,
    stream: ReplyStream,
    finished: Finished,
    text: str,
    hook: Once,
    context: Callable[[], ToolContext],
    requester: str,
    seen: TurnAudience,
) -> int:
    """Run read tools, turn write calls into proposals and cards; store the assistant
    message and one tool message per call, in call order, in one transaction. Returns the
    number of proposals (the turn pauses when it is not zero).

    Audiences: the assistant message, write calls and errors are of the prompt's audience
    (their arguments come from it); a read's result is of the audience its tool declared.
    A proposal keeps who may read it and what the prompt had read (its card's provenance)."""
    where = narrowest(seen.place, seen.audience)
    followed = proposal_sources(seen.sources)
    refused_reads: list[tuple[Question, Ruling]] = []
    prepared = await prepare_calls(
        finished.tool_calls,
        desk.registry,
        context,
        stream.task,
        settings.tool_timeout,
        settings.max_tool_calls_per_round,
        screen_reads(desk.door, conversation, requester, where, followed, refused_reads),
    )
    stream.set_status("")
    decided = await decide(desk.door, db, prepared, conversation, requester, where, followed)
    proposals = []
    allowed = []
    granted: dict[int, Grant] = {}
    async with db.transaction() as session:
        assistant = await repo.add_message(
            session,
            conversation,
            Role.ASSISTANT,
            text or None,
            tool_calls=[c.as_openai() for c in finished.tool_calls],
            slack_ts=stream.message_ts[0] if stream.message_ts else None,
            prompt_tokens=finished.usage.prompt_tokens if finished.usage else None,
            completion_tokens=finished.usage.completion_tokens if finished.usage else None,
            cached_tokens=finished.usage.cached_tokens if finished.usage else None,
            model=finished.model,
        )
        assistant.audience, assistant.requester = seen.audience, requester
        for refused_question, refused_ruling in refused_reads:
            record_ruling(session, refused_question, refused_ruling, Step.PROPOSE)
        for item in prepared:
            tool_message = await repo.add_message(
                session,
                conversation,
                Role.TOOL,
                item.content(),
                tool_call_id=item.call.id,
                tool_name=item.call.name,
            )
            read = item.source is not None  # a read that ran and said what it read
            failed = read and (item.result or {}).get("status") == "error"  # words of its server
            tool_message.audience = (
                narrowest(item.audience) if read and not failed else seen.audience
            )
            tool_message.source, tool_message.requester = item.source, requester
            if not item.needs_approval:
                continue
            assert item.tool is not None
            assert item.preview is not None
            assert item.arguments is not None
            question, ruling = decided.get(item.call.id) or (None, None)
            if question is not None and ruling is not None and ruling.outcome == "deny":
                tool_message.content = stored_result(denied(ruling))
                record_ruling(session, question, ruling, Step.PROPOSE)
                continue
            policy = desk.policies.for_tool(item.tool.name, item.tool.pack)
            expiry = settings.proposal_expiry
            if item.tool.expires_after is not None:
                expiry = item.tool.expires_after
            if policy.expires_after_minutes is not None:
                expiry = timedelta(minutes=policy.expires_after_minutes)
            kept = None if ruling is None else ruling.record
            if ruling is not None and ruling.outcome in ("ask", "grant"):
                steps = ladder(kept)  # the ladder decides, unless a timeout does
                timeout = (kept or {}).get("timeout")
                expiry = parse_duration(timeout) if timeout else expiry_with(steps, expiry)
            proposals.append(
                await desk.approvals.propose(
                    session,
                    team_id=conversation.team_id,
                    conversation_id=conversation.id,
                    assistant_message_id=assistant.id,
                    result_message_id=tool_message.id,
                    tool_call_id=item.call.id,
                    tool_name=item.tool.name,
                    arguments=item.arguments,
                    preview=item.preview,
                    requester=requester,
                    channel_id=conversation.channel_id,
                    thread_ts=conversation.thread_ts or None,
                    expires_in=expiry,
                    policy=kept,
                )
            )
            proposals[-1].audience = where
            proposals[-1].provenance = [s.as_json() for s in followed] or None
            if question is not None and ruling is not None:
                record_ruling(session, question, ruling, Step.PROPOSE, None, proposals[-1].id)
                if ruling.outcome == "allow":
                    rule = ruling.rule or "default"
                    approved = await desk.approvals.approve_by_rule(
                        session, proposals[-1], rule, ruling.version
                    )
                    allowed.append(approved.id)
                elif ruling.outcome == "grant" and ruling.grant_id is not None:
                    approved, grant = await desk.approvals.approve_by_grant(
                        session, proposals[-1], ruling.grant_id
                    )
                    granted[approved.id] = grant
        await hook(session)
    for proposal in proposals:
        if proposal.id in granted:
            await desk.cards.note_granted(proposal, granted[proposal.id])
            if desk.execute is not None:
                desk.execute(proposal.id)
        elif proposal.id in allowed:
            await desk.cards.note_allowed(proposal)
            if desk.execute is not None:
                desk.execute(proposal.id)
        else:
            await desk.cards.post(proposal)
    return len(proposals)
