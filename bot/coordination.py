"""What replicas share when `REDIS_URL` is set: the workspace's rate windows, one per Slack
method we pace (`chat.update`, `chat.appendStream`, `chat.startStream`, `chat.stopStream`: two
replicas together stay within Slack's limits, and a 429 pauses that method on both); the lock
that keeps one thread's turns in order is `bot.thread_locks`. Without Redis both live in the
process.

If Redis stops answering (every call has a socket time-out, so a hung Redis cannot stall a
reply), each replica falls back to its own window, sized to its share of the budget (the limit
divided by the replicas last seen alive), and to its own lock, and says so in the log; replies
keep flowing, only the cross-replica guarantee is lost until Redis is back.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import math
import time
import uuid
from collections import deque
from collections.abc import Callable
from typing import Protocol

from redis.asyncio import Redis
from redis.exceptions import RedisError

log = logging.getLogger(__name__)


# A Redis that stops answering costs a reply at most this long per call, then the replica
# falls back to its own window and locks.
REDIS_TIMEOUT_SECONDS = 1.0


def redis_client(url: str) -> Redis:
    """The replicas' shared Redis, with time-outs on every call (see the module's doc)."""
    return Redis.from_url(
        url,
        socket_timeout=REDIS_TIMEOUT_SECONDS,
        socket_connect_timeout=REDIS_TIMEOUT_SECONDS,
        health_check_interval=30,
    )


class Window(Protocol):
    """Calls recorded in a sliding window of `seconds`, at most `limit` of them."""

    async def take(self, keep_free: int) -> tuple[bool, float | None]:
        """Record one call if more than `keep_free` slots are free. Otherwise (False, seconds
        until a slot frees, or None if none will)."""
        ...

    async def free(self, within: float = 0.0) -> int:
        """Slots free right now (without taking one); with `within`, free `within` seconds from
        now if no call were made meanwhile (the calls that leave the window by then count)."""
        ...

    async def pause(self, seconds: float) -> None: ...

    async def paused_for(self) -> float: ...

    def resize(self, limit: int) -> None:
        """From now on hold at most `limit` calls (a learned rate moved)."""
        ...


class LocalWindow:
    def __init__(
        self, limit: int, seconds: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limit = limit
        self.seconds = seconds
        self._clock = clock
        self._calls: deque[float] = deque()
        self._paused_until = 0.0

    def _expire(self, now: float) -> None:
        while self._calls and self._calls[0] <= now - self.seconds:
            self._calls.popleft()

    async def free(self, within: float = 0.0) -> int:
        now = self._clock()
        self._expire(now)
        leaving = bisect.bisect_right(self._calls, now + within - self.seconds)
        return max(0, self.limit - len(self._calls) + leaving)

    async def take(self, keep_free: int) -> tuple[bool, float | None]:
        now = self._clock()
        self._expire(now)
        if len(self._calls) < self.limit - keep_free:
            self._calls.append(now)
            return True, 0.0
        if not self._calls:
            return False, None
        return False, self._calls[0] + self.seconds - now

    async def pause(self, seconds: float) -> None:
        self._paused_until = max(self._paused_until, self._clock() + seconds)

    async def paused_for(self) -> float:
        return max(0.0, self._paused_until - self._clock())

    def resize(self, limit: int) -> None:
        self.limit = max(1, limit)


class Breaker:
    """After Redis fails, skip it for `cool_off` seconds: one time-out, not one per call."""

    def __init__(self, cool_off: float = 5.0) -> None:
        self.cool_off = cool_off
        self._open_until = 0.0
        self.warned = False

    @property
    def closed(self) -> bool:
        return time.monotonic() >= self._open_until

    def failed(self, exc: Exception, what: str) -> None:
        self._open_until = time.monotonic() + self.cool_off
        if not self.warned:
            log.warning("Redis unavailable (%s): %s", exc, what)
            self.warned = True

    def succeeded(self) -> None:
        self.warned = False


_TAKE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', tonumber(ARGV[1]) - tonumber(ARGV[2]))
local used = redis.call('ZCARD', KEYS[1])
if used < tonumber(ARGV[3]) - tonumber(ARGV[4]) then
  redis.call('ZADD', KEYS[1], ARGV[1], ARGV[5])
  redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2]) * 1000))
  return {1, '0'}
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if oldest[2] then
  return {0, tostring(tonumber(oldest[2]) + tonumber(ARGV[2]) - tonumber(ARGV[1]))}
end
return {0, '-1'}
"""


class RedisWindow:
    """The same window in a Redis sorted set, checked and recorded atomically (Lua); times are
    wall-clock seconds, which replicas share."""

    REPLICA_TTL = 60.0  # a replica not seen for this long no longer counts

    def __init__(
        self, redis: Redis, key: str, limit: int, seconds: float, replica: str | None = None
    ) -> None:
        self.redis = redis
        self.key = key
        self.limit = limit
        self.seconds = seconds
        self.replica = replica or uuid.uuid4().hex
        self.replicas = 1
        self._seen_at = 0.0
        self._take = redis.register_script(_TAKE)
        self._fallback = LocalWindow(limit, seconds, time.time)
        self.breaker = Breaker()

    async def _count_replicas(self) -> None:
        """Announce this replica and count the live ones (every ten seconds at most), so a
        fallback window takes only this replica's share of the workspace's budget."""
        now = time.time()
        if now - self._seen_at < 10:
            return
        self._seen_at = now
        key = f"{self.key}:replicas"
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.zadd(key, {self.replica: now})
            pipe.zremrangebyscore(key, "-inf", now - self.REPLICA_TTL)
            pipe.zcard(key)
            pipe.expire(key, int(self.REPLICA_TTL * 2))
            results = await pipe.execute()
        self.replicas = max(1, int(results[2]))
        self._fallback.limit = max(1, self.limit // self.replicas)

    def resize(self, limit: int) -> None:
        self.limit = max(1, limit)
        self._fallback.limit = max(1, self.limit // self.replicas)

    def _down(self, exc: Exception) -> None:
        self.breaker.failed(exc, f"using this replica's share of the window {self.key}")

    async def take(self, keep_free: int) -> tuple[bool, float | None]:
        if not self.breaker.closed:
            return await self._fallback.take(keep_free)
        try:
            await self._count_replicas()
            granted, wait = await self._take(
                keys=[self.key],
                args=[time.time(), self.seconds, self.limit, keep_free, uuid.uuid4().hex],
            )
        except RedisError as exc:
            self._down(exc)
            return await self._fallback.take(keep_free)
        self.breaker.succeeded()
        seconds = float(wait)
        return bool(int(granted)), (None if seconds < 0 else seconds)

    async def free(self, within: float = 0.0) -> int:
        if not self.breaker.closed:
            return await self._fallback.free(within)
        try:
            now = time.time()
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.zremrangebyscore(self.key, "-inf", now - self.seconds)
                pipe.zcount(self.key, f"({now + within - self.seconds}", "+inf")
                results = await pipe.execute()
        except RedisError as exc:
            self._down(exc)
            return await self._fallback.free(within)
        return max(0, self.limit - int(results[1]))

    async def pause(self, seconds: float) -> None:
        await self._fallback.pause(seconds)
        if not self.breaker.closed:
            return
        with contextlib.suppress(RedisError):
            until = time.time() + seconds
            current = await self.redis.get(f"{self.key}:paused")
            if current is None or float(current) < until:
                await self.redis.set(f"{self.key}:paused", until, px=math.ceil(seconds * 1000))

    async def paused_for(self) -> float:
        local = await self._fallback.paused_for()
        if not self.breaker.closed:
            return local
        try:
            until = await self.redis.get(f"{self.key}:paused")
        except RedisError as exc:
            self._down(exc)
            return local
        return max(local, float(until) - time.time()) if until is not None else local
