"""One deadline over many awaits, with one timer: a model request from sending it to its last
token (`bot.llm`), whose chunks are awaited one by one inside an async generator.

`asyncio.timeout` cannot span the generator's `yield`s (the consumer runs there, and would be
cancelled instead), and one `asyncio.timeout` per chunk costs a timer per chunk (about 4 µs
each here, ten times this). Here the timer cancels the awaiting task only while it is inside
`read`; a deadline that passes between two reads is seen by the next one. Cancellation is
counted as `asyncio.timeout` counts it: a cancel from anyone else (a Stop, a shutdown) that
arrives meanwhile stays a cancellation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


class Deadline:
    """`read(awaitable)` raises `TimeoutError` once `seconds` have passed since this was made
    (None: never). `close()` drops the timer."""

    def __init__(self, seconds: float | None) -> None:
        self.expired = False
        self._reader: asyncio.Task[object] | None = None
        self._timer = (
            None
            if seconds is None
            else asyncio.get_running_loop().call_later(seconds, self._expire)
        )

    def _expire(self) -> None:
        self.expired = True
        if self._reader is not None:
            self._reader.cancel()

    async def read(self, awaitable: Awaitable[T]) -> T:
        if self.expired:
            if asyncio.iscoroutine(awaitable):
                awaitable.close()  # never awaited: no "was never awaited" warning
            raise TimeoutError
        task = asyncio.current_task()
        assert task is not None
        cancelling = task.cancelling()
        self._reader = task
        try:
            return await awaitable
        except asyncio.CancelledError:
            if self.expired and task.uncancel() <= cancelling:
                raise TimeoutError from None
            raise
        finally:
            self._reader = None

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
