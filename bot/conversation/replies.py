"""How a turn's reply is made and how the thread shows the turn's progress.

A reply streams natively when the settings allow it and the workspace's scheduler has a start
for it (`bot/slack/budgets.py`), else as edits. With native streaming the thread's agent status
says `processing` while the turn works, `suspended` while its proposals wait for people and
`active` when it is done; `STREAMING=edit` keeps the classic reply without either.
"""

from __future__ import annotations

import asyncio

from slack_sdk.web.async_client import AsyncWebClient

from bot.conversation.turn_settings import TurnSettings
from bot.slack.agent_status import AgentStatus, Outcome, Status
from bot.slack.budgets import WorkspaceBudgets
from bot.slack.edit_budget import EditBudget
from bot.slack.native_reply import NativeOptions
from bot.slack.streamer import Journal, ReplyStream

# STREAMING=native: how long a reply waits for a stream start (Tier 2) before it uses edits.
NATIVE_PATIENCE_SECONDS = 30.0


class Replies:
    def __init__(
        self,
        slack: AsyncWebClient,
        budget: EditBudget,
        settings: TurnSettings,
        journal: Journal | None,
        budgets: WorkspaceBudgets | None,
    ) -> None:
        self.slack = slack
        self.budget = budget
        self.settings = settings
        self.journal = journal
        self.budgets = budgets if settings.streaming != "edit" else None
        self.status = AgentStatus(slack) if self.budgets is not None else None

    def new(self, channel: str, thread_ts: str | None, user: str, team: str) -> ReplyStream:
        """A reply for `user` (of workspace `team`) in `channel`, in thread `thread_ts`."""
        native = None
        if self.budgets is not None:
            native = NativeOptions(
                self.budgets.appends,
                self.budgets.streams,
                user,
                team,
                patience=NATIVE_PATIENCE_SECONDS if self.settings.streaming == "native" else 0.0,
                min_interval=self.settings.min_append_interval,
                owed_finals=self.budgets.owed_finals,
            )
        return ReplyStream(
            self.slack,
            self.budget,
            channel,
            thread_ts,
            max_chars=self.settings.max_chars,
            min_interval=self.settings.min_edit_interval,
            journal=self.journal,
            native=native,
            reader=user,  # in a DM, the one person who reads it
        )

    def working(self, stream: ReplyStream, user: str) -> asyncio.Task[Outcome] | None:
        """The thread shows that the agent works (concurrently with the reply's start)."""
        if self.status is None:
            return None
        return asyncio.create_task(
            self.status.set(stream.channel, stream.thread_ts, "processing", user)
        )

    async def done(
        self, stream: ReplyStream, working: asyncio.Task[Outcome] | None, user: str
    ) -> None:
        """`suspended` while the turn's proposals wait for people, else `active`."""
        if self.status is None or working is None:
            return
        await asyncio.shield(working)
        final: Status = "suspended" if stream.paused else "active"
        await asyncio.shield(self.status.set(stream.channel, stream.thread_ts, final, user))

    async def set_active(self, channel: str, thread_ts: str, user: str) -> None:
        """The thread's session leaves `processing` (after a Stop with nothing left to end)."""
        if self.status is not None:
            await self.status.set(channel, thread_ts, "active", user)
