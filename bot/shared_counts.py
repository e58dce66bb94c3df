"""Counts that replicas add up through Redis: how many of the workspace's replies hold
something of a shared window (the finals owed by replies in parts, the replies open on the
`chat.update` budget), so that each replica keeps the reserve all of them need, not only its
own (three replicas each kept slots for their own finals: another's first parts took them) nor
its own times the replicas (which over-reserved whenever the replies were not spread evenly).

Each replica's own count is the truth; Redis holds the last one each replica said, and who
said it when (the Redis server's clock). A replica not heard from for `REPLICA_TTL` seconds
(it crashed) no longer counts. Every read says this replica's count again, so a replica that
keeps reading never drops out; a change is said at once, the latest value only.

Without Redis (or while it does not answer) the others count nothing: each replica then uses
a window of its own (`bot.coordination`), which the others do not share.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from typing import Protocol

from redis.asyncio import Redis
from redis.exceptions import RedisError

from bot.coordination import REDIS_NOW, Breaker

# A read this recent is used again (the edit budget's dispatcher asks at every step).
FRESH_SECONDS = 0.2

# KEYS[1] the counts (replica -> count), KEYS[2] when each replica last said its count.
# ARGV this replica, its count, seconds a replica counts after it last said. Returns the
# other live replicas' counts added up.
_SAY = (
    REDIS_NOW
    + """
local ttl = tonumber(ARGV[3])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], at(now), ARGV[1])
for _, gone in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', at(now - ttl))) do
  redis.call('HDEL', KEYS[1], gone)
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', at(now - ttl))
redis.call('EXPIRE', KEYS[1], math.ceil(ttl * 2))
redis.call('EXPIRE', KEYS[2], math.ceil(ttl * 2))
local others = 0
local counts = redis.call('HGETALL', KEYS[1])
for i = 1, #counts, 2 do
  if counts[i] ~= ARGV[1] then others = others + tonumber(counts[i + 1]) end
end
return others
"""
)


class Count(Protocol):
    """This replica's count of something, and the other replicas'."""

    mine: int

    def add(self, step: int = 1) -> None: ...

    async def others(self) -> int:
        """The other live replicas' counts added up (0 without replicas)."""
        ...

    async def stop(self) -> None: ...


class LocalCount:
    """One process: nobody else counts."""

    def __init__(self) -> None:
        self.mine = 0

    def add(self, step: int = 1) -> None:
        self.mine += step

    async def others(self) -> int:
        return 0

    async def stop(self) -> None:
        pass


class SharedCount:
    """This replica's count in Redis, next to the other replicas' (see the module's doc)."""

    REPLICA_TTL = 60.0

    def __init__(self, redis: Redis, key: str, breaker: Breaker | None = None) -> None:
        self.mine = 0
        self.key = key
        self.replica = uuid.uuid4().hex
        self.breaker = breaker or Breaker()
        self._say = redis.register_script(_SAY)
        self._others = 0
        self._read_at = float("-inf")
        self._said: int | None = None  # the count Redis last heard from this replica
        self._saying: asyncio.Task[None] | None = None
        self._one_at_a_time = asyncio.Lock()

    def add(self, step: int = 1) -> None:
        self.mine += step
        if self._saying is None or self._saying.done():
            with contextlib.suppress(RuntimeError):  # no running loop: said at the next read
                self._saying = asyncio.get_running_loop().create_task(self._say_changes())

    async def _say_changes(self) -> None:
        while self._said != self.mine and self.breaker.closed:
            await self._exchange()

    async def _exchange(self) -> None:
        """Say this replica's count; hear the others' (0 while Redis does not answer). One at
        a time: two in flight could reach Redis in either order, the older count last."""
        async with self._one_at_a_time:
            await self._exchange_now()

    async def _exchange_now(self) -> None:
        mine = self.mine
        try:
            others = await self._say(
                keys=[self.key, f"{self.key}:said"], args=[self.replica, mine, self.REPLICA_TTL]
            )
        except RedisError as exc:
            self.breaker.failed(exc, f"counting this replica's replies only ({self.key})")
            self._others, self._said = 0, None
            return
        self.breaker.succeeded()
        self._others, self._said = max(0, int(others)), mine
        self._read_at = time.monotonic()

    async def others(self) -> int:
        if not self.breaker.closed:
            return 0
        if time.monotonic() - self._read_at >= FRESH_SECONDS or self._said != self.mine:
            await self._exchange()
        return self._others

    async def stop(self) -> None:
        if self._saying is not None:
            self._saying.cancel()
            await asyncio.gather(self._saying, return_exceptions=True)
