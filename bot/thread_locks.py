"""One turn at a time per conversation, in this process and, with `REDIS_URL`, across replicas
(a Redis lease; `bot.coordination` holds the shared rate windows and the Redis client)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import AsyncIterator

from redis.asyncio import Redis
from redis.asyncio.lock import Lock
from redis.exceptions import LockError, RedisError

from bot.coordination import Breaker

log = logging.getLogger(__name__)


class ThreadLocks:
    """One turn at a time per conversation: in this process, and across replicas via Redis.

    The Redis lock is a lease: it expires after `LEASE_SECONDS` unless its holder, alive,
    extends it (every third of the lease), so a crashed replica's threads free themselves and a
    long turn keeps its thread. A waiter waits for as long as Redis answers; if Redis fails,
    the turn goes on ordered within this replica only, and the log says so.
    """

    LEASE_SECONDS = 60.0

    def __init__(self, redis: Redis | None = None, prefix: str = "countersign") -> None:
        self.redis = redis
        self.prefix = prefix
        self.breaker = Breaker()
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
            if self.redis is None or not self.breaker.closed:
                yield
                return
            shared = self.redis.lock(
                f"{self.prefix}:thread:{conversation_id}",
                timeout=self.LEASE_SECONDS,
                sleep=0.05,
                blocking=True,
                blocking_timeout=None,
            )
            try:
                acquired = bool(await shared.acquire())
                self.breaker.succeeded()
            except RedisError as exc:
                self.breaker.failed(exc, "ordering turns in this replica only")
                acquired = False
            keeper = (
                asyncio.get_running_loop().create_task(self._keep(shared)) if acquired else None
            )
            try:
                yield
            finally:
                if keeper is not None:
                    keeper.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await keeper
                if acquired:
                    with contextlib.suppress(LockError, RedisError):
                        await shared.release()

    async def _keep(self, shared: Lock) -> None:
        while True:
            await asyncio.sleep(self.LEASE_SECONDS / 3)
            try:
                await shared.reacquire()
            except (LockError, RedisError) as exc:
                log.warning("could not extend a thread lock: %s", exc)
