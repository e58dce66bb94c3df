"""Background work started by listeners after they acknowledge, tracked for a clean shutdown."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

log = logging.getLogger(__name__)


class TaskGroup:
    """Keeps references to running turns; `drain` lets them finish, then cancels the rest."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()
        self.accepting = True

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any] | None:
        if not self.accepting:
            coro.close()
            log.warning("shutting down: %s was not started", name)
            return None
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s failed", task.get_name(), exc_info=task.exception())

    @property
    def running(self) -> int:
        return len(self._tasks)

    async def drain(
        self,
        grace_seconds: float,
        release: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Stop accepting work, wait up to `grace_seconds`, then cancel what is left (each turn
        finalises its reply with a note when cancelled). Whatever still waits five seconds
        later is released with `release` (e.g. the edit budget stops granting, so replies hand
        their final text to the journal) and given five more."""
        self.accepting = False
        if not self._tasks:
            return
        _, pending = await asyncio.wait(set(self._tasks), timeout=grace_seconds)
        for task in pending:
            task.cancel()
        if pending:
            _, pending = await asyncio.wait(pending, timeout=5)
        if pending and release is not None:
            await release()
        if pending:
            await asyncio.wait(pending, timeout=5)


def new_worker_id() -> str:
    """Unique per process; it names the holder of every lease this process takes."""
    return f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"
