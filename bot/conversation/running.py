"""The turns this process is running, by thread, so that a Stop can find and cancel them."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.slack.streamer import ReplyStream


@dataclass(eq=False)
class RunningTurn:
    task: asyncio.Task[Any]
    team: str
    channel: str
    thread_ts: str
    requester: str
    stream: ReplyStream | None = None
    stopped_by: str | None = None  # set by a Stop just before it cancels the task


class RunningTurns:
    def __init__(self) -> None:
        self._turns: set[RunningTurn] = set()

    @contextmanager
    def track(
        self,
        team: str,
        channel: str,
        thread_ts: str | None,
        requester: str,
        stream: ReplyStream | None = None,
    ) -> Iterator[RunningTurn]:
        """Register the current task as a turn in `thread_ts` for as long as the block runs."""
        task = asyncio.current_task()
        assert task is not None
        turn = RunningTurn(task, team, channel, thread_ts or "", requester, stream)
        self._turns.add(turn)
        try:
            yield turn
        finally:
            self._turns.discard(turn)

    def in_thread(self, team: str, channel: str, thread_ts: str) -> list[RunningTurn]:
        return [
            t
            for t in self._turns
            if t.thread_ts and (t.team, t.channel, t.thread_ts) == (team, channel, thread_ts)
        ]

    def current(self) -> RunningTurn | None:
        task = asyncio.current_task()
        return next((t for t in self._turns if t.task is task), None)

    def stopping(self) -> str | None:
        """Who stopped the current turn, if a Stop is what cancelled it."""
        turn = self.current()
        return turn.stopped_by if turn is not None else None
