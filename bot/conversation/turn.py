"""One turn: a user's message in, a live streamed reply out, everything persisted.

listener -> `Conversations.handle` (bot/conversation/intake.py) -> dedupe + conversation ->
placeholder -> history window
-> LLM stream -> `ReplyStream` -> stored assistant message with its token usage; tool calls go
to `tool_round`. Every turn ends in `finally`: a final text or a plain note, whatever failed.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from slack_sdk.web.async_client import AsyncWebClient

from bot.audience import place
from bot.conversation.intake import Intake
from bot.conversation.memory import Memory
from bot.conversation.model_round import ModelRounds
from bot.conversation.notes import (
    answer_note,
    pause_note,
    rounds_note,
)
from bot.conversation.private_reply import TurnAudience, deliver_held
from bot.conversation.replies import Replies
from bot.conversation.resuming import Resuming
from bot.conversation.running import RunningTurns
from bot.conversation.shared_files import TurnFiles
from bot.conversation.spending import SpendGate, TurnRun
from bot.conversation.titles import Titles
from bot.conversation.tokens import TokenCounter
from bot.conversation.tool_round import ActionDesk, Once, OnStored, tool_round
from bot.conversation.turn_settings import TurnSettings
from bot.db import repositories as repo
from bot.db.claims import DeliveryClaims
from bot.db.histories import History
from bot.db.models import Conversation, Role
from bot.db.session import Database
from bot.llm import LLM, Finished
from bot.metrics import TURNS
from bot.slack.budgets import WorkspaceBudgets
from bot.slack.edit_budget import EditBudget
from bot.slack.feedback import feedback_block
from bot.slack.streamer import Journal, ReplyStream
from bot.spend.standing import Refused
from bot.thread_locks import ThreadLocks
from bot.tools.registry import ToolContext

if TYPE_CHECKING:
    from bot.spend.ledger import Spend

log = logging.getLogger(__name__)


class Conversations(Intake, Resuming, ModelRounds):
    """Runs turns. Turns of one conversation run one after another, in arrival order. Every
    turn ends with a final text or a plain note, whatever fails on the way."""

    def __init__(
        self,
        db: Database,
        llm: LLM,
        slack: AsyncWebClient,
        budget: EditBudget,
        settings: TurnSettings,
        desk: ActionDesk | None = None,
        locks: ThreadLocks | None = None,
        journal: Journal | None = None,
        budgets: WorkspaceBudgets | None = None,
        spend: Spend | None = None,
    ) -> None:
        self.db = db
        self.llm = llm
        self.slack = slack
        self.budget = budget
        self.settings = settings
        self.desk = desk
        self.memory = Memory(db, llm, TokenCounter(llm.model), settings.budget, settings.vision)
        self.files = TurnFiles.of(db, slack, self.memory.counter.truncate, settings.file_tokens)
        self.claims = DeliveryClaims(db)
        self.locks = locks or ThreadLocks()
        self.replies = Replies(slack, budget, settings, journal, budgets)
        self.running = RunningTurns()
        self.titles: Titles | None = None  # names new conversations (set by the app)
        reply = llm.max_tokens or settings.budget.reply
        self.spending = SpendGate(db, spend, self.memory.counter, reply)
        self.memory.spending = self.spending

    def _tool_context(self, conversation: Conversation, requester: str) -> ToolContext:
        return ToolContext(
            db=self.db,
            slack=self.slack,
            team_id=conversation.team_id,
            channel_id=conversation.channel_id,
            requester=requester,
            links=self.settings.links,
        )

    async def _respond(
        self,
        conversation: Conversation,
        stream: ReplyStream,
        requester: str,
        on_stored: OnStored | None = None,
        run: TurnRun | None = None,
        history: History | None = None,
    ) -> bool:
        """Model rounds until an answer, a pause for approval or at a budget, or the round
        limit. True once something of the reply (or the pause) is stored (`on_stored` runs in
        that same transaction). `run`: the model and turn key (default: the chat model);
        `history`: the conversation's, read with the request's own write (the first round's)."""
        run = run or TurnRun(self.llm)
        hook = Once(on_stored)
        rounds = 0
        seen = TurnAudience(place(conversation.channel_id, requester, False))
        while True:
            start, held = len(stream.source), len(seen.held)
            try:
                finished = await self._model_round(
                    conversation, stream, seen, requester, run, history
                )
                history = None  # a later round reads what this one stored
            except asyncio.CancelledError:
                if self.running.stopping() and stream.source[start:].strip():
                    # Stopped mid-answer: the next turn's model sees what the person saw.
                    text = stream.source[start:]
                    await asyncio.shield(
                        self._store_answer(
                            conversation, stream, text, None, hook, seen.audience, requester
                        )
                    )
                raise
            if finished is None:
                return hook.done
            if isinstance(finished, Refused):
                await self._pause_at_budget(
                    conversation, stream, requester, run, finished, hook, seen
                )
                return True
            text = stream.source[start:] + "".join(seen.held[held:])
            if not finished.tool_calls or self.desk is None:
                await deliver_held(self.slack, stream, conversation.channel_id, requester, seen)
                said = bool(stream.source.strip())
                if said and not finished.cut:
                    stream.closing_blocks = [feedback_block()]  # a finished answer
                await stream.finish(answer_note(finished, run.llm, said))
                await self._store_answer(
                    conversation, stream, text, finished, hook, seen.audience, requester
                )
                TURNS.labels(outcome=finished.finish_reason if finished.cut else "answered").inc()
                return True
            rounds += 1
            if rounds > self.settings.max_tool_rounds:
                await deliver_held(self.slack, stream, conversation.channel_id, requester, seen)
                await stream.finish(rounds_note(self.settings.max_tool_rounds))
                await self._store_answer(
                    conversation, stream, text, finished, hook, seen.audience, requester
                )
                TURNS.labels(outcome="rounds_exhausted").inc()
                return True
            assert self.desk is not None
            paused = await tool_round(
                self.desk,
                self.db,
                self.settings,
                conversation,
                stream,
                finished,
                text,
                hook,
                lambda: self._tool_context(conversation, requester),
                requester,
                seen,
            )
            if paused:
                await deliver_held(self.slack, stream, conversation.channel_id, requester, seen)
                stream.paused = True
                await stream.finish(pause_note(paused))
                TURNS.labels(outcome="paused").inc()
                return True
            if seen.held:
                seen.held.append("\n\n")
            elif stream.source.strip():
                stream.append("\n\n")

    async def _store_answer(
        self,
        conversation: Conversation,
        stream: ReplyStream,
        text: str,
        finished: Finished | None,
        hook: Once,
        audience: str,
        requester: str,
    ) -> None:
        """The answer, with what it used on the model that gave it (None: stopped mid-way,
        nothing reported)."""
        usage = finished.usage if finished is not None else None
        async with self.db.transaction() as session:
            stored = await repo.add_message(
                session,
                conversation,
                Role.ASSISTANT,
                text,
                slack_ts=stream.answer_ts,
                prompt_tokens=usage.prompt_tokens if usage else None,
                completion_tokens=usage.completion_tokens if usage else None,
                cached_tokens=usage.cached_tokens if usage else None,
                model=finished.model if finished is not None else None,
            )
            stored.audience = audience  # the narrowest of what its prompt held
            stored.requester = requester
            await hook(session)
