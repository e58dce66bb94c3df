"""What replicas share when `REDIS_URL` is set: the workspace's rate windows, one per Slack
method we pace (`chat.update`, `chat.appendStream`, `chat.startStream`, `chat.stopStream`: two
replicas together stay within Slack's limits, and a 429 pauses that method on both); the lock
that keeps one thread's turns in order is `bot.thread_locks`. Without Redis both live in the
process.

Every time those shared windows keep is the Redis server's (`TIME` inside the Lua scripts
that check and record a call, count what is free, pause a method and count the replicas), never
a replica's: replicas whose clocks disagree by minutes still share one window fairly.

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

    async def give_back(self) -> None:
        """Forget the last call recorded here: it was not made after all (another window the
        call needed refused it)."""
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

    def record(self) -> None:
        """A call made now, counted here too (see `RedisWindow.take`)."""
        now = self._clock()
        self._expire(now)
        self._calls.append(now)

    async def give_back(self) -> None:
        if self._calls:
            self._calls.pop()

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


# Every shared time is the Redis server's (`TIME`), never a replica's: a replica whose clock
# runs ahead would otherwise score its calls in the future, where they stay in everyone's window
# (the others told to wait ten minutes) and never expire for itself. Scores are seconds, written
# with microseconds (Lua's own number-to-string keeps only 14 digits).
REDIS_NOW = """
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local function at(seconds) return string.format('%.6f', seconds) end
"""

# KEYS[1] the window; ARGV seconds, limit, keep_free, a unique member. {granted, wait}: wait is
# the seconds until the oldest call leaves (never more than the window), '-1' if none will.
_TAKE = (
    REDIS_NOW
    + """
local seconds = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', at(now - seconds))
local used = redis.call('ZCARD', KEYS[1])
if used < tonumber(ARGV[2]) - tonumber(ARGV[3]) then
  redis.call('ZADD', KEYS[1], at(now), ARGV[4])
  redis.call('PEXPIRE', KEYS[1], math.ceil(seconds * 1000))
  return {1, '0'}
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if oldest[2] then
  local wait = math.min(seconds, math.max(0, tonumber(oldest[2]) + seconds - now))
  return {0, at(wait)}
end
return {0, '-1'}
"""
)

# KEYS[1] the window; ARGV seconds, within. The calls still in the window `within` from now.
_USED = (
    REDIS_NOW
    + """
local seconds = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', at(now - seconds))
return redis.call('ZCOUNT', KEYS[1], '(' .. at(now + tonumber(ARGV[2]) - seconds), '+inf')
"""
)

# KEYS[1] the replicas; ARGV this replica, seconds a replica counts after it was last seen.
_REPLICAS = (
    REDIS_NOW
    + """
local ttl = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], at(now), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', at(now - ttl))
redis.call('EXPIRE', KEYS[1], math.ceil(ttl * 2))
return redis.call('ZCARD', KEYS[1])
"""
)

# KEYS[1] the pause; ARGV milliseconds. Paused that long unless already paused for longer. The
# pause is the key's time to live; its value (the server's time it ends) is for the record.
_PAUSE = (
    REDIS_NOW
    + """
local ms = tonumber(ARGV[1])
if redis.call('PTTL', KEYS[1]) < ms then
  redis.call('SET', KEYS[1], at(now + ms / 1000), 'PX', ms)
end
return 1
"""
)


class RedisWindow:
    """The same window in a Redis sorted set, checked and recorded atomically (Lua scripts).
    Times are the Redis server's, shared by every replica whatever their clocks; `clock` (this
    replica's) serves only its own fallback window and how often it announces itself."""

    REPLICA_TTL = 60.0  # a replica not seen for this long no longer counts

    def __init__(
        self,
        redis: Redis,
        key: str,
        limit: int,
        seconds: float,
        replica: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.redis = redis
        self.key = key
        self.limit = limit
        self.seconds = seconds
        self.replica = replica or uuid.uuid4().hex
        self.replicas = 1
        self._clock = clock
        self._seen_at = float("-inf")
        self._take = redis.register_script(_TAKE)
        self._used = redis.register_script(_USED)
        self._replicas = redis.register_script(_REPLICAS)
        self._pause = redis.register_script(_PAUSE)
        self._fallback = LocalWindow(limit, seconds, clock)
        self.breaker = Breaker()
        self._last_taken: str | None = None  # the member of the last call recorded here

    async def _count_replicas(self) -> None:
        """Announce this replica and count the live ones (every ten seconds at most), so a
        fallback window takes only this replica's share of the workspace's budget."""
        now = self._clock()
        if now - self._seen_at < 10:
            return
        self._seen_at = now
        count = await self._replicas(
            keys=[f"{self.key}:replicas"], args=[self.replica, self.REPLICA_TTL]
        )
        self.replicas = max(1, int(count))
        self._fallback.limit = max(1, self.limit // self.replicas)

    def resize(self, limit: int) -> None:
        self.limit = max(1, limit)
        self._fallback.limit = max(1, self.limit // self.replicas)

    def _down(self, exc: Exception) -> None:
        self.breaker.failed(exc, f"using this replica's share of the window {self.key}")

    async def take(self, keep_free: int) -> tuple[bool, float | None]:
        if not self.breaker.closed:
            return await self._fallback.take(keep_free)
        member = uuid.uuid4().hex
        try:
            await self._count_replicas()
            granted, wait = await self._take(
                keys=[self.key], args=[self.seconds, self.limit, keep_free, member]
            )
        except RedisError as exc:
            self._down(exc)
            return await self._fallback.take(keep_free)
        self.breaker.succeeded()
        if int(granted):
            self._last_taken = member
            # Its own calls count in its fallback window too: a replica that loses Redis has
            # already made part of its share (it took a whole share afresh: 429s at once).
            self._fallback.record()
        seconds = float(wait)
        return bool(int(granted)), (None if seconds < 0 else seconds)

    async def give_back(self) -> None:
        member, self._last_taken = self._last_taken, None
        await self._fallback.give_back()
        if member is None or not self.breaker.closed:
            return
        with contextlib.suppress(RedisError):
            await self.redis.zrem(self.key, member)

    async def free(self, within: float = 0.0) -> int:
        if not self.breaker.closed:
            return await self._fallback.free(within)
        try:
            used = await self._used(keys=[self.key], args=[self.seconds, within])
        except RedisError as exc:
            self._down(exc)
            return await self._fallback.free(within)
        return max(0, self.limit - int(used))

    async def pause(self, seconds: float) -> None:
        await self._fallback.pause(seconds)
        if not self.breaker.closed or seconds <= 0:
            return
        with contextlib.suppress(RedisError):
            await self._pause(keys=[f"{self.key}:paused"], args=[math.ceil(seconds * 1000)])

    async def paused_for(self) -> float:
        local = await self._fallback.paused_for()
        if not self.breaker.closed:
            return local
        try:
            left = await self.redis.pttl(f"{self.key}:paused")
        except RedisError as exc:
            self._down(exc)
            return local
        return max(local, int(left) / 1000)
