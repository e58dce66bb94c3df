"""The `Window` protocol every budget takes its calls from, and `LocalWindow`: a sliding
window in this process (the token buckets behind the same protocol are in `buckets`)."""

from __future__ import annotations

import bisect
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol


class Window(Protocol):
    """Room for calls: a sliding window (at most `limit` calls in any `seconds`) or a token
    bucket (`limit` tokens, one back every so often). A slot is a call the window allows now."""

    async def take(self, keep_free: int) -> tuple[bool, float | None]:
        """Record one call if the window is not paused and more than `keep_free` slots are
        free. Otherwise (False, seconds the pause has left or until a slot frees, or None if
        none will). One round trip where the window is shared: the pause is checked with it."""
        ...

    async def free(self, within: float = 0.0) -> int:
        """Slots free right now (without taking one); with `within`, free `within` seconds from
        now if no call were made meanwhile (the calls that leave the window by then count)."""
        ...

    async def give_back(self) -> None:
        """Forget the last call recorded here: it was not made after all (another window the
        call needed refused it)."""
        ...

    async def pause(self, seconds: float) -> None: ...

    async def paused_for(self) -> float: ...

    # Whether the last refused `take` was refused by a pause (a 429's Retry-After), not by a
    # full window: a pause says nothing of the rate (`LearnedRate.saturated`).
    paused_refusal: bool

    def resize(self, limit: int) -> None:
        """From now on hold at most `limit` calls (a learned rate moved)."""
        ...


class LocalPause:
    """A pause (a 429's Retry-After) kept in this process, for the local windows and buckets."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._paused_until = 0.0
        self.paused_refusal = False

    async def _refused_paused(self) -> float:
        """Seconds the pause has left (0.0: none), noted for `paused_refusal`."""
        paused = await self.paused_for()
        self.paused_refusal = paused > 0
        return paused

    async def pause(self, seconds: float) -> None:
        self._paused_until = max(self._paused_until, self._clock() + seconds)

    async def paused_for(self) -> float:
        return max(0.0, self._paused_until - self._clock())


class LocalWindow(LocalPause):
    def __init__(
        self, limit: int, seconds: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__(clock)
        self.limit = limit
        self.seconds = seconds
        self._calls: deque[float] = deque()

    def _expire(self, now: float) -> None:
        while self._calls and self._calls[0] <= now - self.seconds:
            self._calls.popleft()

    async def free(self, within: float = 0.0) -> int:
        now = self._clock()
        self._expire(now)
        leaving = bisect.bisect_right(self._calls, now + within - self.seconds)
        return max(0, self.limit - len(self._calls) + leaving)

    async def take(self, keep_free: int) -> tuple[bool, float | None]:
        paused = await self._refused_paused()
        if paused > 0:
            return False, paused
        now = self._clock()
        self._expire(now)
        if len(self._calls) < self.limit - keep_free:
            self._calls.append(now)
            return True, 0.0
        if not self._calls:
            return False, None
        return False, self._calls[0] + self.seconds - now

    def record(self) -> None:
        """A call made now, counted here too (see `RedisWindow.take`)."""
        now = self._clock()
        self._expire(now)
        self._calls.append(now)

    async def give_back(self) -> None:
        if self._calls:
            self._calls.pop()

    def resize(self, limit: int) -> None:
        self.limit = max(1, limit)
