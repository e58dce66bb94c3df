"""One turn: a user's message in, a live streamed reply out, everything persisted.

listener -> `Conversations.handle` -> dedupe + conversation -> placeholder -> history window
-> LLM stream -> `ReplyStream` -> stored assistant message with its token usage.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.conversation.incoming import Incoming
from bot.conversation.memory import Budget, Memory
from bot.conversation.tokens import TokenCounter
from bot.conversation.tool_calls import prepare_calls
from bot.coordination import ThreadLocks
from bot.db import repositories as repo
from bot.db.claims import DeliveryClaims
from bot.db.models import Conversation, Role
from bot.db.session import Database
from bot.llm import LLM, Finished, LLMError, TextDelta, Usage
from bot.slack.edit_budget import EditBudget
from bot.slack.errors import slack_error
from bot.slack.render import unescape
from bot.slack.streamer import ReplyStream
from bot.tools.registry import ToolContext, ToolRegistry

if TYPE_CHECKING:
    from bot.approvals.policy import Policies
    from bot.approvals.service import ApprovalsService
    from bot.slack.card_publisher import CardPublisher

log = logging.getLogger(__name__)

INTERRUPTED = ":warning: _Interrupted: Countersign was restarting before this reply finished._"
EMPTY = "_The model returned an empty answer._"


def failure_note(reason: str) -> str:
    return f":warning: _I could not finish this reply: {reason}. Please try again._"


@dataclass(frozen=True)
class TurnSettings:
    system_prompt: str
    history_window: int
    max_chars: int
    min_edit_interval: float
    max_tool_rounds: int = 8
    tool_timeout: float = 60.0
    proposal_expiry: timedelta = timedelta(minutes=15)
    public_base_url: str | None = None
    budget: Budget = field(default_factory=Budget)


@dataclass
class ActionDesk:
    """Where write calls go: the tools, who approves them, the service and the cards."""

    registry: ToolRegistry
    policies: Policies
    approvals: ApprovalsService
    cards: CardPublisher


def pause_note(count: int) -> str:
    what = "1 action" if count == 1 else f"{count} actions"
    return f":hourglass_flowing_sand: _Waiting for approval of {what} (see below)._"


def rounds_note(rounds: int) -> str:
    return f":warning: _I stopped after {rounds} rounds of tool calls without an answer._"


class Conversations:
    """Runs turns. Turns of one conversation run one after another, in arrival order."""

    def __init__(
        self,
        db: Database,
        llm: LLM,
        slack: AsyncWebClient,
        budget: EditBudget,
        settings: TurnSettings,
        desk: ActionDesk | None = None,
        locks: ThreadLocks | None = None,
    ) -> None:
        self.db = db
        self.llm = llm
        self.slack = slack
        self.budget = budget
        self.settings = settings
        self.desk = desk
        self.memory = Memory(db, llm, TokenCounter(llm.model), settings.budget)
        self.claims = DeliveryClaims(db)
        self.locks = locks or ThreadLocks()

    async def _claim(self, incoming: Incoming) -> bool:
        """True if this message is ours to answer and was not handled before.

        Kept to the one write that must precede the placeholder (so that a duplicate never
        posts one); a thread reply without a mention is ours only in a known conversation.
        """
        if not (incoming.mentions_bot or incoming.is_dm):
            async with self.db.transaction() as session:
                known = await repo.find_conversation(
                    session, incoming.team_id, incoming.channel_id, incoming.conversation_key
                )
            if known is None:
                return False  # a thread the bot is not part of
        if not await self.claims.claim(incoming.delivery_keys()):
            log.info("duplicate delivery of %s ignored", incoming.delivery_keys())
            return False
        return True

    async def _conversation(self, incoming: Incoming) -> tuple[Conversation, bool]:
        async with self.db.transaction() as session:
            return await repo.get_or_create_conversation(
                session,
                incoming.team_id,
                incoming.channel_id,
                incoming.conversation_key,
                incoming.user_id,
            )

    async def handle(self, incoming: Incoming, bot_user_id: str | None = None) -> None:
        if not await self._claim(incoming):
            return
        stream = self._stream(incoming.channel_id, incoming.reply_thread_ts)
        placeholder = asyncio.create_task(stream.start())
        try:
            conversation, created = await self._conversation(incoming)
            async with self.locks.hold(conversation.id):
                await self._record_user_message(conversation, created, incoming, bot_user_id)
                await placeholder
                await self._respond(conversation, stream, incoming.user_id)
        except asyncio.CancelledError:
            # Shutting down: whatever the reply shows must end with a note, not "Thinking…".
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(placeholder), 5)
            if placeholder.done() and not placeholder.cancelled() and not placeholder.exception():
                await asyncio.shield(stream.finish(INTERRUPTED))
            raise

    async def _record_user_message(
        self,
        conversation: Conversation,
        created: bool,
        incoming: Incoming,
        bot_user_id: str | None,
    ) -> None:
        earlier: list[dict[str, Any]] = []
        if created and incoming.joins_existing_thread:
            earlier = await self._earlier_thread_messages(incoming, bot_user_id)
        async with self.db.transaction() as session:
            for message in earlier:
                await repo.add_message(session, conversation, **message)
            await repo.add_message(
                session,
                conversation,
                Role.USER,
                incoming.text,
                slack_ts=incoming.ts,
                slack_user=incoming.user_id,
            )

    async def _earlier_thread_messages(
        self, incoming: Incoming, bot_user_id: str | None
    ) -> list[dict[str, Any]]:
        """The thread so far, when the bot is first mentioned inside an existing thread."""
        found: list[dict[str, Any]] = []
        cursor: str | None = None
        try:
            while True:
                page = await self.slack.conversations_replies(
                    channel=incoming.channel_id,
                    ts=incoming.thread_ts or incoming.ts,
                    limit=200,
                    cursor=cursor,
                )
                for m in page.get("messages") or []:
                    if float(m.get("ts", "0")) >= float(incoming.ts):
                        continue
                    from_bot = bool(m.get("bot_id")) or m.get("user") == bot_user_id
                    text = unescape(str(m.get("text") or ""))
                    if not text.strip():
                        continue
                    found.append(
                        {
                            "role": Role.ASSISTANT if from_bot else Role.USER,
                            "content": text,
                            "slack_ts": m.get("ts"),
                            "slack_user": None if from_bot else m.get("user"),
                        }
                    )
                cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
                if not cursor:
                    break
        except SlackApiError as exc:
            log.warning("could not read the earlier thread: %s", slack_error(exc))
        return found[-self.settings.history_window :]

    def _stream(self, channel: str, thread_ts: str | None) -> ReplyStream:
        return ReplyStream(
            self.slack,
            self.budget,
            channel,
            thread_ts,
            max_chars=self.settings.max_chars,
            min_interval=self.settings.min_edit_interval,
        )

    def _tool_context(self, conversation: Conversation, requester: str) -> ToolContext:
        return ToolContext(
            db=self.db,
            slack=self.slack,
            team_id=conversation.team_id,
            channel_id=conversation.channel_id,
            requester=requester,
            public_base_url=self.settings.public_base_url,
        )

    async def _model_round(
        self, conversation: Conversation, stream: ReplyStream
    ) -> Finished | None:
        """One streamed model call; None if the model failed (the reply already says so)."""
        tools = self.desk.registry.schemas() if self.desk and len(self.desk.registry) else None
        finished: Finished | None = None
        try:
            prompt = await self.memory.prompt(
                conversation.id, self.settings.system_prompt, tools, self.settings.history_window
            )
            async for event in self.llm.stream(prompt, tools):
                if isinstance(event, TextDelta):
                    stream.append(event.text)
                else:
                    finished = event
        except LLMError as exc:
            log.warning("model failed in conversation %s: %s", conversation.id, exc)
            await stream.finish(failure_note(exc.user_message))
            return None
        return finished

    async def _respond(
        self, conversation: Conversation, stream: ReplyStream, requester: str
    ) -> None:
        """Model rounds until an answer, a pause for approval, or the round limit."""
        rounds = 0
        while True:
            start = len(stream.source)
            finished = await self._model_round(conversation, stream)
            if finished is None:
                return
            text = stream.source[start:]
            usage = finished.usage
            if not finished.tool_calls or self.desk is None:
                await stream.finish("" if stream.source.strip() else EMPTY)
                await self._store_answer(conversation, stream, text, usage)
                return
            rounds += 1
            if rounds > self.settings.max_tool_rounds:
                await stream.finish(rounds_note(self.settings.max_tool_rounds))
                await self._store_answer(conversation, stream, text, usage)
                return
            paused = await self._handle_tool_calls(conversation, stream, requester, finished, text)
            if paused:
                await stream.finish(pause_note(paused))
                return
            if stream.source.strip():
                stream.append("\n\n")

    async def _store_answer(
        self,
        conversation: Conversation,
        stream: ReplyStream,
        text: str,
        usage: Usage | None,
    ) -> None:
        async with self.db.transaction() as session:
            await repo.add_message(
                session,
                conversation,
                Role.ASSISTANT,
                text,
                slack_ts=stream.message_ts[0] if stream.message_ts else None,
                prompt_tokens=usage.prompt_tokens if usage else None,
                completion_tokens=usage.completion_tokens if usage else None,
            )

    async def _handle_tool_calls(
        self,
        conversation: Conversation,
        stream: ReplyStream,
        requester: str,
        finished: Finished,
        text: str,
    ) -> int:
        """Run read tools, turn write calls into proposals and cards; store the assistant
        message and one tool message per call, in call order, in one transaction. Returns the
        number of proposals (the turn pauses when it is not zero)."""
        desk = self.desk
        assert desk is not None
        prepared = await prepare_calls(
            finished.tool_calls,
            desk.registry,
            lambda: self._tool_context(conversation, requester),
            stream.set_status,
            self.settings.tool_timeout,
        )
        stream.set_status("")
        proposals = []
        async with self.db.transaction() as session:
            assistant = await repo.add_message(
                session,
                conversation,
                Role.ASSISTANT,
                text or None,
                tool_calls=[c.as_openai() for c in finished.tool_calls],
                slack_ts=stream.message_ts[0] if stream.message_ts else None,
                prompt_tokens=finished.usage.prompt_tokens if finished.usage else None,
                completion_tokens=finished.usage.completion_tokens if finished.usage else None,
            )
            for item in prepared:
                tool_message = await repo.add_message(
                    session,
                    conversation,
                    Role.TOOL,
                    item.content(),
                    tool_call_id=item.call.id,
                    tool_name=item.call.name,
                )
                if not item.needs_approval:
                    continue
                assert item.tool is not None
                assert item.preview is not None
                assert item.arguments is not None
                policy = desk.policies.for_tool(item.tool.name, item.tool.pack)
                expiry = self.settings.proposal_expiry
                if item.tool.expires_after is not None:
                    expiry = item.tool.expires_after
                if policy.expires_after_minutes is not None:
                    expiry = timedelta(minutes=policy.expires_after_minutes)
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
                    )
                )
        for proposal in proposals:
            await desk.cards.post(proposal)
        return len(proposals)

    async def resume(self, conversation_id: int, note: str | None = None) -> None:
        """Continue a paused turn in its thread with a new live reply, once its proposals are
        settled (their results are already stored as the `tool` messages)."""
        async with self.db.transaction() as session:
            conversation = await session.get(Conversation, conversation_id)
            if conversation is None:
                return
            requester = await repo.last_user(session, conversation_id) or conversation.started_by
            if note:
                await repo.add_message(session, conversation, Role.SYSTEM, note)
        stream = self._stream(conversation.channel_id, conversation.thread_ts or None)
        async with self.locks.hold(conversation.id):
            await stream.start()
            try:
                await self._respond(conversation, stream, requester)
            except asyncio.CancelledError:
                await asyncio.shield(stream.finish(INTERRUPTED))
                raise
