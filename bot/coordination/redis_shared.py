"""What every kind of room shared through Redis has in common: the client (time-outs on every
call), the breaker that skips a Redis that failed, the server's clock the Lua scripts read, and
`RedisShared`: replica counting, pauses, and the local fallback sized to this replica's share."""

from __future__ import annotations

import contextlib
import logging
import math
import time
import uuid
from collections.abc import Callable
from typing import Generic, TypeVar

from redis.asyncio import Redis
from redis.exceptions import RedisError

from bot.coordination.windows import Window

log = logging.getLogger("bot.coordination")


# A Redis that stops answering costs a reply at most this long per call, then the replica
# falls back to its own window and locks.
REDIS_TIMEOUT_SECONDS = 1.0


def redis_client(url: str) -> Redis:
    """The replicas' shared Redis, with time-outs on every call (see `bot.coordination`)."""
    return Redis.from_url(
        url,
        socket_timeout=REDIS_TIMEOUT_SECONDS,
        socket_connect_timeout=REDIS_TIMEOUT_SECONDS,
        health_check_interval=30,
    )


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
# (the others told to wait ten minutes) and never expire for itself. Times are seconds, written
# with microseconds (Lua's own number-to-string keeps only 14 digits).
REDIS_NOW = """
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local function at(seconds) return string.format('%.6f', seconds) end
"""

# Prefixed to a take script (after REDIS_NOW): while KEYS[2], the pause, lives, refuse with
# the seconds it has left (and a third element: refused by the pause), so a call costs one
# round trip, not a pause check and then a take.
UNLESS_PAUSED = """
local paused = redis.call('PTTL', KEYS[2])
if paused > 0 then return {0, at(paused / 1000), 1} end
"""

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

Local = TypeVar("Local", bound=Window)


class RedisShared(Generic[Local]):
    """Room kept in Redis under `key`, with `fallback` (this process's own, of the same kind)
    used while Redis is down. Subclasses size the fallback to this replica's share
    (`_share_changed`) and count their own calls in it too, so a replica that loses Redis
    has already made part of its share (taking a whole share afresh: 429s at once)."""

    REPLICA_TTL = 60.0  # a replica not seen for this long no longer counts

    def __init__(
        self,
        redis: Redis,
        key: str,
        fallback: Local,
        replica: str | None,
        clock: Callable[[], float],
    ) -> None:
        self.redis = redis
        self.key = key
        self.replica = replica or uuid.uuid4().hex
        self.replicas = 1
        self._clock = clock
        self._seen_at = float("-inf")
        self._replicas = redis.register_script(_REPLICAS)
        self._pause = redis.register_script(_PAUSE)
        self._fallback = fallback
        self.breaker = Breaker()
        self.paused_refusal = False  # see `Window.paused_refusal`

    def _share_changed(self) -> None:
        """Size the fallback to this replica's share (`self.replicas` changed)."""

    async def _count_replicas(self) -> None:
        """Announce this replica and count the live ones (every ten seconds at most), so a
        fallback takes only this replica's share of the workspace's budget."""
        now = self._clock()
        if now - self._seen_at < 10:
            return
        self._seen_at = now
        count = await self._replicas(
            keys=[f"{self.key}:replicas"], args=[self.replica, self.REPLICA_TTL]
        )
        self.replicas = max(1, int(count))
        self._share_changed()

    async def _paused_here(self) -> float:
        """Before a take: this replica announced (every ten seconds, paused or not), and the
        pause it knows of itself, if any (then Redis need not be asked)."""
        await self._count_replicas()
        paused = await self._fallback.paused_for()
        self.paused_refusal = paused > 0
        return paused

    async def _fallback_take(self, keep_free: int) -> tuple[bool, float | None]:
        """A take from this replica's own share (Redis is down)."""
        taken = await self._fallback.take(keep_free)
        self.paused_refusal = self._fallback.paused_refusal
        return taken

    def _down(self, exc: Exception) -> None:
        self.breaker.failed(exc, f"using this replica's share of {self.key}")

    @property
    def pause_key(self) -> str:
        return f"{self.key}:paused"

    async def pause(self, seconds: float) -> None:
        await self._fallback.pause(seconds)
        if not self.breaker.closed or seconds <= 0:
            return
        with contextlib.suppress(RedisError):
            await self._pause(keys=[self.pause_key], args=[math.ceil(seconds * 1000)])

    async def paused_for(self) -> float:
        local = await self._fallback.paused_for()
        if not self.breaker.closed:
            return local
        try:
            left = await self.redis.pttl(self.pause_key)
        except RedisError as exc:
            self._down(exc)
            return local
        return max(local, int(left) / 1000)
