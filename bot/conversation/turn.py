"""One turn: a user's message in, a live streamed reply out, everything persisted.

listener -> `Conversations.handle` -> dedupe + conversation -> placeholder -> history window
-> LLM stream -> `ReplyStream` -> stored assistant message with its token usage.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from dataclasses import dataclass
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.conversation.history import build_prompt
from bot.conversation.incoming import Incoming
from bot.db import repositories as repo
from bot.db.claims import DeliveryClaims
from bot.db.models import Conversation, Role
from bot.db.session import Database
from bot.llm import LLM, Finished, LLMError, TextDelta
from bot.slack.edit_budget import EditBudget
from bot.slack.errors import slack_error
from bot.slack.render import unescape
from bot.slack.streamer import ReplyStream

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


class Conversations:
    """Runs turns. Turns of one conversation run one after another, in arrival order."""

    def __init__(
        self,
        db: Database,
        llm: LLM,
        slack: AsyncWebClient,
        budget: EditBudget,
        settings: TurnSettings,
    ) -> None:
        self.db = db
        self.llm = llm
        self.slack = slack
        self.budget = budget
        self.settings = settings
        self.claims = DeliveryClaims(db)
        self._locks: weakref.WeakValueDictionary[int, asyncio.Lock] = weakref.WeakValueDictionary()

    def _lock(self, conversation_id: int) -> asyncio.Lock:
        lock = self._locks.get(conversation_id)
        if lock is None:
            lock = asyncio.Lock()
            self._locks[conversation_id] = lock
        return lock

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
        stream = ReplyStream(
            self.slack,
            self.budget,
            incoming.channel_id,
            incoming.reply_thread_ts,
            max_chars=self.settings.max_chars,
            min_interval=self.settings.min_edit_interval,
        )
        placeholder = asyncio.create_task(stream.start())
        try:
            conversation, created = await self._conversation(incoming)
            async with self._lock(conversation.id):
                await self._record_user_message(conversation, created, incoming, bot_user_id)
                await placeholder
                await self._respond(conversation, stream)
        except asyncio.CancelledError:
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

    async def _respond(self, conversation: Conversation, stream: ReplyStream) -> None:
        async with self.db.transaction() as session:
            stored = await repo.recent_messages(
                session, conversation.id, self.settings.history_window
            )
        prompt = build_prompt(self.settings.system_prompt, stored, self.settings.history_window)
        finished: Finished | None = None
        try:
            async for event in self.llm.stream(prompt):
                if isinstance(event, TextDelta):
                    stream.append(event.text)
                else:
                    finished = event
        except LLMError as exc:
            log.warning("model failed in conversation %s: %s", conversation.id, exc)
            await stream.finish(failure_note(exc.user_message))
            return
        assert finished is not None
        await stream.finish("" if stream.source.strip() else EMPTY)
        usage = finished.usage
        async with self.db.transaction() as session:
            await repo.add_message(
                session,
                conversation,
                Role.ASSISTANT,
                stream.source,
                slack_ts=stream.message_ts[0] if stream.message_ts else None,
                prompt_tokens=usage.prompt_tokens if usage else None,
                completion_tokens=usage.completion_tokens if usage else None,
            )
