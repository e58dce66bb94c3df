"""Resuming a paused turn: once its proposals are settled, the model continues in the same
thread with a new live reply. A mixin of `Conversations` (bot/conversation/turn.py), which owns
the state named below and `_respond`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from sqlalchemy import select

from bot.audience import place
from bot.conversation.ending import end_stopped, finish_unfinished
from bot.conversation.notes import BROKE, INTERRUPTED, failure_note
from bot.conversation.replies import Replies
from bot.conversation.running import RunningTurns
from bot.conversation.spending import SpendGate, TurnRun, chosen_for_turn
from bot.conversation.tool_round import OnStored
from bot.db import repositories as repo
from bot.db.models import BudgetPause, Conversation, Proposal, Role
from bot.db.session import Database
from bot.llm import LLM
from bot.slack.agent_status import Outcome
from bot.slack.streamer import ReplyStream
from bot.thread_locks import ThreadLocks


class Resuming:
    db: Database
    replies: Replies
    running: RunningTurns
    locks: ThreadLocks

    llm: LLM
    spending: SpendGate
    # Conversations' model rounds: (conversation, stream, requester, on_stored, run) -> stored?
    _respond: Callable[
        [Conversation, ReplyStream, str, OnStored | None, TurnRun | None],
        Coroutine[Any, Any, bool],
    ]

    def _llm_for(self, model: str | None) -> LLM:
        """The chat model, or another one (a budget's cheaper model) on the same connection."""
        if model is None or model == self.llm.model:
            return self.llm
        return LLM(self.llm.client, model, self.llm.max_tokens, self.llm.deadline)

    async def resume(
        self,
        conversation_id: int,
        assistant_message_id: int | None,
        note: str | None = None,
        on_stored: OnStored | None = None,
        paused: BudgetPause | None = None,
    ) -> bool:
        """Continue a paused turn in its thread with a new live reply, once its proposals are
        settled (their results are already stored as the `tool` messages), or once a budget
        that stopped it (`paused`) lets it go on: for the pause's requester, on its `model`
        if one was chosen, with the same turn key. It acts for the person whose request was
        paused. True once the resumed reply is stored, or if there is nothing left to
        resume."""
        async with self.db.transaction() as session:
            conversation = await session.get(Conversation, conversation_id)
            if conversation is None:
                return True  # forgotten meanwhile
            requester = None
            if assistant_message_id is not None:
                requester = await session.scalar(
                    select(Proposal.requester)
                    .where(Proposal.assistant_message_id == assistant_message_id)
                    .limit(1)
                )
            requester = requester or conversation.started_by
            if paused is None and self.spending.active:
                paused = await chosen_for_turn(session, conversation.id, assistant_message_id)
        run = None
        if paused is not None:
            requester = paused.requester
            run = TurnRun(self._llm_for(paused.model), paused.turn_key)
        stream = self.replies.new(
            conversation.channel_id,
            conversation.thread_ts or None,
            requester,
            conversation.team_id,
        )
        placeholder: asyncio.Task[str] | None = None
        status: asyncio.Task[Outcome] | None = None
        running = self.running.track(
            conversation.team_id, conversation.channel_id, stream.thread_ts, requester, stream
        )
        with running as turn:
            try:
                async with self.locks.hold(conversation.id):
                    if note:  # inside the lock: never between a tool_calls row and its results
                        async with self.db.transaction() as session:
                            added = await repo.add_message(session, conversation, Role.SYSTEM, note)
                            added.audience = place(conversation.channel_id, requester, False)
                            added.requester = requester
                    placeholder = asyncio.create_task(stream.start())
                    status = self.replies.working(stream, requester)
                    await placeholder
                    return await self._respond(conversation, stream, requester, on_stored, run)
            except asyncio.CancelledError:
                if placeholder is not None:
                    if await end_stopped(turn.stopped_by, stream, placeholder):
                        return True  # stopped: nothing more to resume
                    await asyncio.shield(
                        finish_unfinished(stream, placeholder, INTERRUPTED, "interrupted")
                    )
                raise
            finally:
                if placeholder is not None:
                    await finish_unfinished(stream, placeholder, failure_note(BROKE), "failed")
                await self.replies.done(stream, status, requester)
