"""Spend before and after each model call of a turn (issue 29, DESIGN promise 10).

Before the call: whom it is for (`Asker`: the workspace, channel, requester, the requester's
user groups, the packs of the tools offered, the turn's key), the prompt counted, and
prompt + REPLY_TOKENS reserved against every budget that applies (`Spend.reserve`), or a
refusal: the turn pauses. After it, whatever happened (an answer, a Stop, a cut stream, a model
error, a cancel), the hold is settled to the usage the server reported or, when it sent none,
to what was counted here; soft thresholds crossed tell the budgets' owners.

With no budget configured none of this costs a database round trip (nor a Slack call).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from openai.types.chat import ChatCompletionMessageParam
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bot.approvals.policy import GroupMembers
from bot.approvals.questions import turn_key
from bot.conversation.tokens import LARGEST_IMAGE_TOKENS, TokenCounter
from bot.db.models import BudgetPause, Conversation, Message, Role
from bot.db.session import Database
from bot.llm import LLM, Completed, Finished, LLMError, StreamEvent, TextDelta, Usage
from bot.slack.budget_notices import SoftNotices
from bot.spend.pauses import RESUMED
from bot.spend.standing import Asker, Refused, Reservation, SoftCrossing, Tokens

if TYPE_CHECKING:
    from bot.spend.budget_model import Budget
    from bot.spend.ledger import Spend

log = logging.getLogger(__name__)


@dataclass
class TurnRun:
    """One run of a turn (fresh or resumed): the model it asks, and the turn's key, which a
    resumed turn keeps (per-turn budgets count the whole turn)."""

    llm: LLM
    turn_key: str | None = None  # found at the first model call that needs it


@dataclass
class Meter:
    """One model call as counted here: its prompt, then what streamed (or was answered)."""

    counter: TokenCounter
    prompt: int
    said: list[str] = field(default_factory=list)
    finished: Finished | None = None
    usage: Usage | None = None  # what the server reported, if it did

    def saw(self, event: StreamEvent) -> None:
        if isinstance(event, TextDelta):
            self.said.append(event.text)
        else:
            self.finished = event
            self.usage = event.usage

    def answered(self, completed: Completed) -> None:
        """A non-streamed answer (a summary, a title) and its reported usage."""
        self.said.append(completed.text)
        self.usage = completed.usage

    def reported(self) -> Tokens | None:
        usage = self.usage
        if usage is None:
            return None
        return Tokens(usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens)

    def counted(self) -> Tokens:
        calls = self.finished.tool_calls if self.finished is not None else []
        spoken = "".join(self.said) + "".join(c.name + c.arguments for c in calls)
        return Tokens(self.prompt, self.counter.text(spoken))


def prompt_tokens(counter: TokenCounter, messages: Sequence[Any], tools: Any) -> int:
    """The prompt as the model will count it, near enough: its messages (an image part as the
    largest image, not its base64 text) and the tools' schemas."""
    total = 3
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            text = " ".join(str(p.get("text") or "") for p in content if isinstance(p, dict))
            images = sum(1 for p in content if isinstance(p, dict) and p.get("type") != "text")
            total += counter.message({**message, "content": text}) + images * LARGEST_IMAGE_TOKENS
        else:
            total += counter.message(message)
    return total + (counter.text(json.dumps(tools, sort_keys=True)) if tools else 0)


async def chosen_for_turn(
    session: AsyncSession, conversation_id: int, resumed_from: int | None = None
) -> BudgetPause | None:
    """The budget pause whose cheaper model the conversation's current turn continued on, if
    any (the newest pause, resumed on a model, with no new request since): a turn resumed
    again later (its proposals settled) stays on that model.

    `resumed_from`: the assistant message whose proposals settled. It must have been written
    by the continued turn (after the pause resumed): another turn of the thread, paused on
    its proposals before someone else's turn paused at a budget and went on on the cheaper
    model, is not that turn, and must not go on as that person's (their reach, their name on
    its writes, their budget's exemption)."""
    latest = await session.scalar(
        select(BudgetPause)
        .where(BudgetPause.conversation_id == conversation_id)
        .order_by(BudgetPause.id.desc())
        .limit(1)
    )
    if latest is None or latest.state != RESUMED or latest.model is None:
        return None
    since = latest.resumed_at or latest.created_at
    if resumed_from is not None:
        written = await session.scalar(select(Message.created_at).where(Message.id == resumed_from))
        if written is None or written < since:
            return None
    asked_since = await session.scalar(
        select(Message.id)
        .where(
            Message.conversation_id == conversation_id,
            Message.role == Role.USER,
            Message.created_at > since,
        )
        .limit(1)
    )
    return None if asked_since is not None else latest


class SpendRefused(LLMError):
    """A summary's or a title's call found no room in a budget: it is skipped, never paused."""


class SpendGate:
    """Counts a turn's model calls against the budgets. The ledger (`spend`) is made by `make`
    the first time the policy in force has a budget: a start without budgets neither builds
    nor imports it (it brings the databases' dialects)."""

    def __init__(
        self,
        db: Database,
        spend: Spend | None,
        counter: TokenCounter,
        reply_tokens: int,
        groups: GroupMembers | None = None,
        notices: SoftNotices | None = None,
    ) -> None:
        self.db = db
        self.spend = spend
        self.counter = counter
        self.reply_tokens = reply_tokens
        self.groups = groups
        self.notices = notices
        self.budgets: Callable[[], tuple[list[Budget], str]] | None = None  # the policy's
        self.make: Callable[[], Spend] | None = None

    def ledger(self) -> Spend | None:
        """The ledger, if any budget is configured now (made on the first one)."""
        made, budgets = self.make, self.budgets
        if self.spend is None and made is not None and budgets is not None and budgets()[0]:
            self.spend = made()
        return self.spend if self.spend is not None and self.spend.any else None

    @property
    def active(self) -> bool:
        return self.ledger() is not None

    async def hold(
        self,
        conversation: Conversation,
        requester: str,
        run: TurnRun,
        packs: frozenset[str],
        messages: Sequence[Any],
        tools: Any,
    ) -> tuple[Reservation | Refused | None, Meter | None]:
        """Reserve one call of `run.llm` on this prompt; (None, None) with no budget at all."""
        spend = self.ledger()
        if spend is None:
            return None, None
        asker = Asker(
            team_id=conversation.team_id,
            channel_id=conversation.channel_id,
            user_id=requester,
            groups=await self._groups_of(requester),
            packs=packs,
            turn_key=await self._turn_key(conversation, run),
        )
        meter = Meter(self.counter, prompt_tokens(self.counter, messages, tools))
        held = await spend.reserve(asker, run.llm.model, meter.prompt, self.reply_tokens)
        return held, meter

    async def complete(
        self,
        llm: LLM,
        conversation_id: int,
        requester: str | None,
        messages: list[ChatCompletionMessageParam],
        max_tokens: int,
    ) -> str:
        """`llm.complete` (a summary, a title) counted against the budgets of the
        conversation's requester; `SpendRefused` at a limit."""
        spend = self.ledger()
        if spend is None:
            return (await llm.complete(messages, max_tokens)).text
        async with self.db.reading() as session:
            conversation = await session.get(Conversation, conversation_id)
        if conversation is None:
            raise SpendRefused("the conversation is gone")
        user = requester or conversation.started_by
        asker = Asker(
            team_id=conversation.team_id,
            channel_id=conversation.channel_id,
            user_id=user,
            groups=await self._groups_of(user),
            packs=frozenset(),
            turn_key=await self._turn_key(conversation, TurnRun(llm)),
        )
        meter = Meter(self.counter, prompt_tokens(self.counter, messages, None))
        held = await spend.reserve(asker, llm.model, meter.prompt, max_tokens)
        if isinstance(held, Refused):
            raise SpendRefused(f"the budget {held.standing.name} is used up")
        try:
            completed = await llm.complete(messages, max_tokens)
            meter.answered(completed)
            return completed.text
        finally:
            await self.settle(held, meter)

    async def settle(self, held: Reservation | Refused | None, meter: Meter | None) -> None:
        """Settle a hold to what the call used. The ledger writes it behind and never
        suspends here, so a Stop or a shutdown cancelling the turn cannot cut it off (and
        the turn is not over before it is recorded). Never raises: the reply is not failed
        by it."""
        if not isinstance(held, Reservation) or not held.counted or meter is None:
            return
        assert self.spend is not None
        try:
            crossings = await self.spend.settle(held, meter.reported(), meter.counted())
        except Exception as exc:  # the hold stays; release_stale charges it later
            log.warning("could not settle a model call: %s", type(exc).__name__)
            return
        if crossings and self.notices is not None:  # a ledger that still returns them
            await asyncio.shield(self._tell(crossings))

    async def _tell(self, crossings: list[SoftCrossing]) -> None:
        for crossing in crossings:
            if self.notices is not None:
                await self.notices.send(crossing)

    async def _turn_key(self, conversation: Conversation, run: TurnRun) -> str:
        """The turn's key: its person's message (kept by a resumed turn). Read only where a
        budget counts turns; other windows do not use it."""
        assert self.spend is not None
        if run.turn_key is None and not any(b.window == "turn" for b in self.spend.budgets()[0]):
            return f"conversation:{conversation.id}"
        if run.turn_key is None:
            async with self.db.reading() as session:
                found = await turn_key(session, conversation.id)
            run.turn_key = found or f"conversation:{conversation.id}"
        return run.turn_key

    async def _groups_of(self, user: str) -> frozenset[str]:
        """The requester's user groups that a budget names (no group budget: no Slack call).
        A group whose members cannot be read counts the requester in: spend is then counted
        against one budget too many, never one too few."""
        assert self.spend is not None
        named = {b.scope.group for b in self.spend.budgets()[0] if b.scope.group}
        if not named or self.groups is None:
            return frozenset()
        found: set[str] = set()
        for group in sorted(named):
            try:
                if user in await self.groups.members(group):
                    found.add(group)
            except Exception as exc:
                log.warning("user group %s unreadable for budgets: %s", group, type(exc).__name__)
                found.add(group)
        return frozenset(found)
