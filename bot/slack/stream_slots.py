"""Native streams' starts and stops (`chat.startStream`, `chat.stopStream`, Tier 2, about 20
a minute each): a reply streams natively only if a start is free now and a stop will be free for
it and for every native reply still open; otherwise (in `auto`) it uses edits. Owned by the
workspace's scheduler (`bot.slack.budgets.WorkspaceBudgets.streams`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from bot.coordination import Window
from bot.slack.edit_budget import BudgetClosed

START = "chat.startStream"
STOP = "chat.stopStream"


NEVER = 1 << 30  # keep_free for a take that only asks when the window frees a call


class StreamSlots:
    """Tier 2 starts and stops. A start is granted only with a stop in reserve for every native
    reply still open (so a reply never waits long for its stop); stops wait their turn."""

    def __init__(
        self, starts: Window, stops: Window, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.starts = starts
        self.stops = stops
        self._clock = clock
        self.open_streams = 0
        self._paused_until = {START: 0.0, STOP: 0.0}
        self._lock = asyncio.Lock()
        self._pauses: set[asyncio.Task[None]] = set()
        self.closed = False
        # Told when a start or a stop waited for room in its window.
        self.on_saturated: Callable[[str, bool], None] | None = None

    def _saturated(self, method: str) -> None:
        if self.on_saturated is not None:
            self.on_saturated(method, True)

    async def _paused(self, method: str) -> float:
        window = self.starts if method == START else self.stops
        local = self._paused_until[method] - self._clock()
        return max(0.0, local, await window.paused_for())

    async def try_open(self) -> bool:
        """Take a start if one is free now and a stop will be free for this reply too."""
        if self.closed:
            return False
        async with self._lock:
            if await self._paused(START) > 0 or await self._paused(STOP) > 0:
                return False
            if await self.stops.free() <= self.open_streams:
                self._saturated(STOP)
                return False
            granted, _ = await self.starts.take(keep_free=0)
            if granted:
                self.open_streams += 1
            else:
                self._saturated(START)
            return granted

    async def open(self, patience: float) -> bool:
        """Wait up to `patience` seconds for a start (`STREAMING=native`); give up at once when
        the starts or stops window cannot free what the reply needs before then."""
        deadline = self._clock() + patience
        while not await self.try_open():
            if self.closed or self._clock() >= deadline or await self._hopeless(deadline):
                return False
            await asyncio.sleep(0.25)
        return True

    async def _hopeless(self, deadline: float) -> bool:
        """Whether the start (or the stop it needs in reserve) frees only after `deadline`.
        A take that keeps more free than any window holds never grants: it only says when
        the oldest call leaves the window."""
        remaining = deadline - self._clock()
        windows = [self.starts]
        if await self.stops.free() <= self.open_streams:
            windows.append(self.stops)
        for window in windows:
            if await window.free() > 0:
                continue
            _, wait = await window.take(keep_free=NEVER)
            if wait is not None and wait > remaining:
                return True
        return False

    def hold(self) -> None:
        """A reply that gave its reserved stop back while waiting for it needs one again."""
        self.open_streams += 1

    def release(self) -> None:
        """A native reply ended without a stop of ours (its stream died or never started)."""
        self.open_streams = max(0, self.open_streams - 1)

    async def stop_permit(self) -> None:
        """Wait for a stop; the caller's reply is released from the open count."""
        try:
            while True:
                if self.closed:
                    raise BudgetClosed("this process is shutting down")
                paused = await self._paused(STOP)
                if paused > 0:
                    await asyncio.sleep(paused)
                    continue
                granted, wait = await self.stops.take(keep_free=0)
                if granted:
                    return
                self._saturated(STOP)
                await asyncio.sleep(min(1.0, wait if wait is not None else 1.0))
        finally:
            self.release()

    def pause(self, method: str, seconds: float) -> None:
        self._paused_until[method] = max(self._paused_until[method], self._clock() + seconds)
        window = self.starts if method == START else self.stops
        task = asyncio.get_running_loop().create_task(window.pause(seconds))
        self._pauses.add(task)  # held until done (the loop keeps only weak references)
        task.add_done_callback(self._pauses.discard)
