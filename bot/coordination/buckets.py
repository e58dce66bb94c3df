"""Token buckets behind the `Window` protocol: `burst` calls at once, then one every `every`
seconds (Slack's "1 per second per channel, short bursts allowed" for `chat.postMessage`).

`margin` is the safety a sliding window gets from being held a little longer than Slack's: our
clock and Slack's disagree by a request's travel time. Here it is `margin` seconds' worth of
tokens never spent (at most all but one token): a call needs 1 + margin/every tokens. Sent calls
that conform to that bucket still conform to Slack's own (same rate, full burst) after each was
delayed by anything from 0 to `margin` on its way: the rate is Slack's, never above it, and
only a burst's last call may wait up to `margin`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from redis.asyncio import Redis
from redis.exceptions import RedisError

from bot.coordination.redis_shared import REDIS_NOW, UNLESS_PAUSED, RedisShared
from bot.coordination.windows import LocalPause

# Tokens are kept to the microsecond, rounded down (a bucket must never hold more than it has).
_EPSILON = 1e-6


def _reserve(burst: int, every: float, margin: float) -> float:
    """The tokens `margin` keeps unspent, at most all but one (a bucket of one still grants)."""
    return min(margin / every, burst - 1.0) if every > 0 else 0.0


class LocalBucket(LocalPause):
    """A token bucket in this process; it starts full."""

    def __init__(
        self,
        burst: int,
        every: float,
        margin: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(clock)
        self.limit = max(1, burst)
        self.every = every
        self.margin = margin
        self._tokens = float(self.limit)
        self._at = clock()

    def _refill(self) -> float:
        now = self._clock()
        if now > self._at:
            self._tokens = min(self.limit, self._tokens + (now - self._at) / self.every)
        self._at = now
        return self._tokens

    async def take(self, keep_free: int) -> tuple[bool, float | None]:
        paused = await self._refused_paused()
        if paused > 0:
            return False, paused
        need = 1 + keep_free + _reserve(self.limit, self.every, self.margin)
        tokens = self._refill()
        if tokens + _EPSILON >= need:
            self._tokens = max(0.0, tokens - 1)
            return True, 0.0
        if self.limit + _EPSILON < need:
            return False, None
        return False, (need - tokens) * self.every

    async def free(self, within: float = 0.0) -> int:
        tokens = min(self.limit, self._refill() + max(0.0, within) / self.every)
        spare = tokens - _reserve(self.limit, self.every, self.margin)
        return max(0, math.floor(spare + _EPSILON))

    def record(self) -> None:
        """A call made now, counted here too (see `RedisShared`)."""
        self._tokens = max(0.0, self._refill() - 1)

    async def give_back(self) -> None:
        self._tokens = min(self.limit, self._refill() + 1)

    def resize(self, limit: int) -> None:
        """Hold at most `limit` tokens (the rate stays)."""
        self.limit = max(1, limit)
        self._tokens = min(self._tokens, self.limit)


# KEYS[1] the bucket (a hash: tokens, and the server's time they were counted); ARGV burst,
# seconds per token. A missing key is a full bucket (it expires once it would be full again).
_STATE = """
local burst = tonumber(ARGV[1])
local every = tonumber(ARGV[2])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1]) or burst
local since = math.min(tonumber(state[2]) or now, now)
tokens = math.min(burst, tokens + (now - since) / every)
local function keep(left)
  local floored = math.floor(left * 1000000) / 1000000
  redis.call('HSET', KEYS[1], 'tokens', string.format('%.6f', floored), 'at', at(now))
  redis.call('PEXPIRE', KEYS[1], math.ceil((burst * every + 1) * 1000))
end
"""
_BUCKET = REDIS_NOW + _STATE

# KEYS[2] the pause; ARGV[3] the tokens a call needs. {granted, wait}: wait is the pause left,
# else '-1' if the bucket never holds enough.
_TAKE = (
    REDIS_NOW
    + UNLESS_PAUSED
    + _STATE
    + """
local need = tonumber(ARGV[3])
if tokens + 0.000001 >= need then
  keep(math.max(0, tokens - 1))
  return {1, '0'}
end
if burst + 0.000001 < need then return {0, '-1'} end
return {0, at((need - tokens) * every)}
"""
)

# ARGV[3] within. The tokens held `within` seconds from now if none were taken, as a string.
_TOKENS = (
    _BUCKET
    + """
return at(math.min(burst, tokens + tonumber(ARGV[3]) / every))
"""
)

_GIVE_BACK = (
    _BUCKET
    + """
keep(math.min(burst, tokens + 1))
return 1
"""
)


class RedisBucket(RedisShared[LocalBucket]):
    """The same bucket in a Redis hash, checked and spent atomically (Lua scripts) on the Redis
    server's clock, shared by every replica whatever their clocks. While Redis is down this
    replica keeps to its share: burst // replicas (at least one), one every `every` * replicas.
    """

    def __init__(
        self,
        redis: Redis,
        key: str,
        burst: int,
        every: float,
        margin: float = 0.0,
        replica: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(redis, key, LocalBucket(burst, every, margin, clock), replica, clock)
        self.limit = max(1, burst)
        self.every = every
        self.margin = margin
        self._take = redis.register_script(_TAKE)
        self._tokens = redis.register_script(_TOKENS)
        self._give_back = redis.register_script(_GIVE_BACK)
        self._taken = False  # the last call was granted by Redis (`give_back` returns it there)

    def _share_changed(self) -> None:
        self._fallback.limit = max(1, self.limit // self.replicas)
        self._fallback.every = self.every * self.replicas

    def resize(self, limit: int) -> None:
        self.limit = max(1, limit)
        self._share_changed()

    def _reserve(self) -> float:
        return _reserve(self.limit, self.every, self.margin)

    async def take(self, keep_free: int) -> tuple[bool, float | None]:
        self._taken = False
        if not self.breaker.closed:
            return await self._fallback_take(keep_free)
        need = 1 + keep_free + self._reserve()
        try:
            paused = await self._paused_here()
            if paused > 0:
                return False, paused  # known here: no need to ask
            granted, wait, *paused_by = await self._take(
                keys=[self.key, self.pause_key], args=[self.limit, self.every, f"{need:.6f}"]
            )
        except RedisError as exc:
            self._down(exc)
            return await self._fallback_take(keep_free)
        self.breaker.succeeded()
        self.paused_refusal = bool(paused_by)
        if int(granted):
            self._taken = True
            self._fallback.record()  # its own calls count in its fallback too (`RedisShared`)
        seconds = float(wait)
        return bool(int(granted)), (None if seconds < 0 else seconds)

    async def give_back(self) -> None:
        taken, self._taken = self._taken, False
        await self._fallback.give_back()
        if not taken or not self.breaker.closed:
            return
        try:
            await self._give_back(keys=[self.key], args=[self.limit, self.every])
        except RedisError as exc:
            self._down(exc)

    async def free(self, within: float = 0.0) -> int:
        if not self.breaker.closed:
            return await self._fallback.free(within)
        try:
            tokens = await self._tokens(
                keys=[self.key], args=[self.limit, self.every, max(0.0, within)]
            )
        except RedisError as exc:
            self._down(exc)
            return await self._fallback.free(within)
        return max(0, math.floor(float(tokens) - self._reserve() + _EPSILON))
