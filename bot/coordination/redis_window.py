"""`RedisWindow`: the sliding window of `LocalWindow` in a Redis sorted set, shared by the
replicas (see `bot.coordination`)."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable

from redis.asyncio import Redis
from redis.exceptions import RedisError

from bot.coordination.redis_shared import REDIS_NOW, UNLESS_PAUSED, RedisShared
from bot.coordination.windows import LocalWindow

# KEYS[1] the window, KEYS[2] its pause; ARGV seconds, limit, keep_free, a unique member.
# {granted, wait}: wait is the pause left, else the seconds until the oldest call leaves
# (never more than the window), '-1' if none will.
_TAKE = (
    REDIS_NOW
    + UNLESS_PAUSED
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


class RedisWindow(RedisShared[LocalWindow]):
    """The same window in a Redis sorted set, checked and recorded atomically (Lua scripts).
    Times are the Redis server's, shared by every replica whatever their clocks; `clock` (this
    replica's) serves only its own fallback window and how often it announces itself."""

    def __init__(
        self,
        redis: Redis,
        key: str,
        limit: int,
        seconds: float,
        replica: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(redis, key, LocalWindow(limit, seconds, clock), replica, clock)
        self.limit = limit
        self.seconds = seconds
        self._take = redis.register_script(_TAKE)
        self._used = redis.register_script(_USED)
        self._last_taken: str | None = None  # the member of the last call recorded here

    def _share_changed(self) -> None:
        self._fallback.limit = max(1, self.limit // self.replicas)

    def resize(self, limit: int) -> None:
        self.limit = max(1, limit)
        self._share_changed()

    async def take(self, keep_free: int) -> tuple[bool, float | None]:
        if not self.breaker.closed:
            return await self._fallback_take(keep_free)
        member = uuid.uuid4().hex
        try:
            paused = await self._paused_here()
            if paused > 0:
                return False, paused  # known here: no need to ask
            granted, wait, *paused_by = await self._take(
                keys=[self.key, self.pause_key],
                args=[self.seconds, self.limit, keep_free, member],
            )
        except RedisError as exc:
            self._down(exc)
            return await self._fallback_take(keep_free)
        self.breaker.succeeded()
        self.paused_refusal = bool(paused_by)
        if int(granted):
            self._last_taken = member
            self._fallback.record()  # its own calls count in its fallback too (`RedisShared`)
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
