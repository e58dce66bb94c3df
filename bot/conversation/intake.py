"""A message in: claimed, its conversation found or opened, stored, then answered. A mixin of
`Conversations` (bot/conversation/turn.py), which owns the state named below and `_respond`.

Before the model is asked a turn makes two writes (the claim with its conversation, then its
message with the history read back) and one Slack read (its files and author, asked for
beside the first write): at 60 replies at once each step waits on a loop busy with all the
others, so a step saved is time saved before every model request (bench/stream.py)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.conversation.addressing import Opened, claim_turn, thread_start
from bot.conversation.ending import end_stopped, finish_unfinished
from bot.conversation.incoming import Incoming
from bot.conversation.memory import LOAD_LIMIT
from bot.conversation.notes import BROKE, INTERRUPTED, failure_note
from bot.conversation.replies import Replies
from bot.conversation.running import RunningTurns
from bot.conversation.shared_files import TurnFiles
from bot.conversation.thread_import import (
    earlier_thread_messages,
    finding_author,
    store_with_files,
)
from bot.conversation.titles import Titles
from bot.conversation.turn_settings import TurnSettings
from bot.db.claims import DeliveryClaims
from bot.db.models import Conversation
from bot.db.session import Database
from bot.db.turn_writes import OPEN_CONVERSATION
from bot.logs import log_context
from bot.provenance import Source
from bot.slack.streamer import ReplyStream
from bot.thread_locks import ThreadLocks

if TYPE_CHECKING:
    from bot.conversation.spending import TurnRun
    from bot.conversation.tool_round import OnStored
    from bot.db.histories import History

log = logging.getLogger(__name__)


class Intake:
    db: Database
    slack: AsyncWebClient
    settings: TurnSettings
    claims: DeliveryClaims
    files: TurnFiles
    replies: Replies
    running: RunningTurns
    locks: ThreadLocks
    titles: Titles | None

    # Conversations' model rounds: (conversation, stream, requester, on_stored, run,
    # history read with the message) -> stored?
    _respond: Callable[
        [Conversation, ReplyStream, str, OnStored | None, TurnRun | None, History | None],
        Coroutine[Any, Any, bool],
    ]

    async def _conversation(self, incoming: Incoming) -> tuple[Conversation, bool]:
        """The thread's conversation, found or opened with other turns' (`Database.group`)."""
        return await self.db.group.add(OPEN_CONVERSATION, thread_start(incoming))

    async def handle(
        self, incoming: Incoming, bot_user_id: str | None = None, bot_id: str | None = None
    ) -> None:
        claimed = await claim_turn(self.db, self.claims, incoming, self.settings.thread_followups)
        if claimed is False:
            return
        if isinstance(claimed, Conversation):  # context only: stored, not answered
            async with self.locks.hold(claimed.id):
                await store_with_files(self.db, self.files, self.slack, claimed, incoming)
            return
        stream = self.replies.new(
            incoming.channel_id, incoming.reply_thread_ts, incoming.user_id, incoming.team_id
        )
        placeholder = asyncio.create_task(stream.start())
        status = self.replies.working(stream, incoming.user_id)
        running = self.running.track(
            incoming.team_id,
            incoming.channel_id,
            incoming.reply_thread_ts,
            incoming.user_id,
            stream,
        )
        with running as turn:
            try:
                async with finding_author(self.slack, incoming) as author:
                    opened = claimed if isinstance(claimed, Opened) else None
                    await self._turn(
                        incoming, stream, placeholder, author, opened, bot_user_id, bot_id
                    )
            except asyncio.CancelledError:
                if await end_stopped(turn.stopped_by, stream, placeholder):
                    return
                # Shutting down: the reply must end with a note, not "Thinking…".
                await asyncio.shield(
                    finish_unfinished(stream, placeholder, INTERRUPTED, "interrupted")
                )
                raise
            except Exception:  # the reply says so below; the details go to the (redacted) log
                log.exception("turn in %s failed", incoming.channel_id)
            finally:
                await finish_unfinished(stream, placeholder, failure_note(BROKE), "failed")
                await self.replies.done(stream, status, incoming.user_id)

    async def _turn(
        self,
        incoming: Incoming,
        stream: ReplyStream,
        placeholder: asyncio.Task[str],
        author: Awaitable[Source],
        opened: Opened | None,
        bot_user_id: str | None,
        bot_id: str | None,
    ) -> None:
        """The claimed message stored, then answered. The history the model reads is read
        with the message's own write, and who wrote it (`author`) was asked for while the
        conversation was being opened: neither is a round trip of its own before the model
        request."""
        if opened is not None:
            conversation, created = opened.conversation, opened.created
        else:
            conversation, created = await self._conversation(incoming)
        if self.titles is not None and (created or conversation.title is None):
            thread = incoming.thread_ts if incoming.is_dm else None
            self.titles.name(
                conversation.id,
                incoming.text,
                (incoming.channel_id, thread) if thread else None,
            )
        with log_context(conversation_id=conversation.id):
            async with self.locks.hold(conversation.id):
                joined = created and incoming.joins_existing_thread
                limit = self.settings.thread_import_messages if joined else 0
                earlier = await earlier_thread_messages(
                    self.slack, incoming, bot_user_id, bot_id, limit, self.settings.history_tier
                )
                history = await store_with_files(
                    self.db,
                    self.files,
                    self.slack,
                    conversation,
                    incoming,
                    earlier,
                    LOAD_LIMIT,
                    author,
                )
                await placeholder
                await self._respond(conversation, stream, incoming.user_id, None, None, history)
