"""What replicas share when `REDIS_URL` is set: the workspace's `chat.update` window (so two
replicas together stay within Slack's 50 a minute, and a 429 pauses both) and the lock that
keeps one thread's turns in order. Without Redis both live in the process.

If Redis stops answering, each replica falls back to its own window and lock and says so in
the log; replies keep flowing, only the cross-replica guarantee is lost until Redis is back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
import uuid
import weakref
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Protocol

from redis.asyncio import Redis
from redis.exceptions import LockError, RedisError

log = logging.getLogger(__name__)


class Window(Protocol):
    """Calls recorded in a sliding window of `seconds`, at most `limit` of them."""

    async def take(self, keep_free: int) -> tuple[bool, float | None]:
        """Record one call if more than `keep_free` slots are free. Otherwise (False, seconds
        until a slot frees, or None if none will)."""
        ...

    async def pause(self, seconds: float) -> None: ...

    async def paused_for(self) -> float: ...


class LocalWindow:
    def __init__(
        self, limit: int, seconds: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limit = limit
        self.seconds = seconds
        self._clock = clock
        self._calls: deque[float] = deque()
        self._paused_until = 0.0

    async def take(self, keep_free: int) -> tuple[bool, float | None]:
        now = self._clock()
        while self._calls and self._calls[0] <= now - self.seconds:
            self._calls.popleft()
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

    def __init__(self, redis: Redis, key: str, limit: int, seconds: float) -> None:
        self.redis = redis
        self.key = key
        self.limit = limit
        self.seconds = seconds
        self._take = redis.register_script(_TAKE)
        self._fallback = LocalWindow(limit, seconds, time.time)
        self._warned = False

    def _down(self, exc: Exception) -> None:
        if not self._warned:
            log.warning("Redis unavailable (%s): using this replica's own edit window", exc)
            self._warned = True

    async def take(self, keep_free: int) -> tuple[bool, float | None]:
        try:
            granted, wait = await self._take(
                keys=[self.key],
                args=[time.time(), self.seconds, self.limit, keep_free, uuid.uuid4().hex],
            )
        except RedisError as exc:
            self._down(exc)
            return await self._fallback.take(keep_free)
        self._warned = False
        seconds = float(wait)
        return bool(int(granted)), (None if seconds < 0 else seconds)

    async def pause(self, seconds: float) -> None:
        await self._fallback.pause(seconds)
        with contextlib.suppress(RedisError):
            until = time.time() + seconds
            current = await self.redis.get(f"{self.key}:paused")
            if current is None or float(current) < until:
                await self.redis.set(f"{self.key}:paused", until, px=math.ceil(seconds * 1000))

    async def paused_for(self) -> float:
        local = await self._fallback.paused_for()
        try:
            until = await self.redis.get(f"{self.key}:paused")
        except RedisError as exc:
            self._down(exc)
            return local
        return max(local, float(until) - time.time()) if until is not None else local


class ThreadLocks:
    """One turn at a time per conversation: in this process, and across replicas via Redis."""

    LEASE_SECONDS = 600  # the longest a turn may hold a thread before others proceed

    def __init__(self, redis: Redis | None = None, prefix: str = "countersign") -> None:
        self.redis = redis
        self.prefix = prefix
        self._local: weakref.WeakValueDictionary[int, asyncio.Lock] = weakref.WeakValueDictionary()

    def _lock(self, conversation_id: int) -> asyncio.Lock:
        lock = self._local.get(conversation_id)
        if lock is None:
            lock = asyncio.Lock()
            self._local[conversation_id] = lock
        return lock

    @contextlib.asynccontextmanager
    async def hold(self, conversation_id: int) -> AsyncIterator[None]:
        async with self._lock(conversation_id):
            if self.redis is None:
                yield
                return
            shared = self.redis.lock(
                f"{self.prefix}:thread:{conversation_id}",
                timeout=self.LEASE_SECONDS,
                blocking_timeout=self.LEASE_SECONDS,
            )
            try:
                acquired = await shared.acquire()
            except RedisError as exc:
                log.warning("Redis unavailable (%s): ordering turns in this replica only", exc)
                acquired = False
            try:
                yield
            finally:
                if acquired:
                    with contextlib.suppress(LockError, RedisError):
                        await shared.release()
