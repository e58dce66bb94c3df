"""Every Slack budget a live reply spends, owned by one scheduler per workspace.

| method | Slack tier | who spends it |
|---|---|---|
| `chat.update` | Tier 3, ~50/min | replies sent as edits, approval cards |
| `chat.appendStream` | Tier 4, 100+/min | natively streamed replies |
| `chat.startStream`, `.stopStream` | Tier 2, ~20/min each | a start and a stop per native reply |

`chat.update` and `chat.appendStream` each go through an `EditBudget` (final texts first, then
the reply refreshed longest ago, never more than the window allows). Starts and stops go
through `StreamSlots`: a reply streams natively only if a start is free now and a stop will be
free for it and for every native reply still open; otherwise (in `auto`) it uses edits. A 429
pauses the method that got it and no other. With Redis, every window is shared by the replicas.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass

from redis.asyncio import Redis

from bot.coordination import LocalWindow, RedisWindow, Window
from bot.slack.edit_budget import WINDOW_MARGIN_SECONDS, WINDOW_SECONDS, BudgetClosed, EditBudget

START = "chat.startStream"
STOP = "chat.stopStream"
APPEND = "chat.appendStream"
UPDATE = "chat.update"


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
                return False
            granted, _ = await self.starts.take(keep_free=0)
            if granted:
                self.open_streams += 1
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
                await asyncio.sleep(min(1.0, wait if wait is not None else 1.0))
        finally:
            self.release()

    def pause(self, method: str, seconds: float) -> None:
        self._paused_until[method] = max(self._paused_until[method], self._clock() + seconds)
        window = self.starts if method == START else self.stops
        task = asyncio.get_running_loop().create_task(window.pause(seconds))
        self._pauses.add(task)  # held until done (the loop keeps only weak references)
        task.add_done_callback(self._pauses.discard)


@dataclass
class Limits:
    edits_per_minute: int = 50
    appends_per_minute: int = 600
    starts_per_minute: int = 20


class WorkspaceBudgets:
    """The scheduler of one workspace: every method's budget, and who gets to call next."""

    def __init__(
        self,
        limits: Limits,
        redis: Redis | None = None,
        workspace_key: str = "",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        seconds = WINDOW_SECONDS + WINDOW_MARGIN_SECONDS
        prefix = f"countersign:{{method}}:{hashlib.sha256(workspace_key.encode()).hexdigest()[:16]}"

        def window(method: str, limit: int) -> Window:
            if redis is None:
                return LocalWindow(limit, seconds, clock)
            return RedisWindow(redis, prefix.format(method=method), limit, seconds)

        self.limits = limits
        self.edits = EditBudget(
            limits.edits_per_minute, clock=clock, window=window(UPDATE, limits.edits_per_minute)
        )
        self.appends = EditBudget(
            limits.appends_per_minute,
            clock=clock,
            window=window(APPEND, limits.appends_per_minute),
        )
        self.streams = StreamSlots(
            window(START, limits.starts_per_minute), window(STOP, limits.starts_per_minute), clock
        )

    def rate_limited(self, method: str, seconds: float) -> None:
        """Slack answered 429 to `method`: pause that method only."""
        if method == UPDATE:
            self.edits.pause(seconds)
        elif method == APPEND:
            self.appends.pause(seconds)
        elif method in (START, STOP):
            self.streams.pause(method, seconds)

    async def stop(self) -> None:
        self.streams.closed = True
        await self.edits.stop()
        await self.appends.stop()
