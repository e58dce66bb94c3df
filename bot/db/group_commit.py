"""Group commit: small writes that need not wait for one another share a transaction.

SQLite has one writer at a time, and within a process `Database.transaction` queues every
transaction behind the one in flight. When 60 replies start at once, each turn's few one-row
transactions (its conversation, its message, its title, its live reply's journal row) queued
there one after another: 240 of them, each a BEGIN IMMEDIATE and a COMMIT around a row or two,
about a second before the last turn could ask the model (`bench/stream.py`). Here the writes
that arrive while a transaction is in flight are done together by the next one. If one of
them fails, the transaction is rolled back and each of its writes is done again alone, so that
a failing write fails alone and the others are committed (no savepoints: one costs two more
round trips per write, as much as the transaction it would save). Whoever waits for a write
learns of it once its transaction has committed.

Writes of one kind (`Together`: a conversation opened, a user's message stored, a title) are
done in one statement for the whole batch where SQL allows it: with SQLite each statement is
several trips to the driver's thread and back, each waiting for a busy event loop, so 60 of
them cost far more than one of 60 rows.

On PostgreSQL the writes are as cheap to batch (one commit, one fsync, for many), and a batch
holds one connection of the pool instead of many.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sqlalchemy.ext.asyncio import AsyncSession

T = TypeVar("T")
FOLLOW_TURNS = 3  # loop turns a batch of several writers leaves them before the next batch
P = TypeVar("P")
Work = Callable[[AsyncSession], Awaitable[Any]]


@dataclass(frozen=True, eq=False)
class Together(Generic[P, T]):
    """A kind of write done for many at once: `write(session, payloads)` returns one result
    per payload, in their order. Payloads of one batch come from writers that do not wait for
    one another (each caller waits for its commit before its next write)."""

    name: str
    write: Callable[[AsyncSession, Sequence[P]], Awaitable[Sequence[T]]]


@dataclass
class _Pending:
    kind: Together[Any, Any] | None
    item: Any  # the payload of a `kind`, else the work
    future: asyncio.Future[Any]


class GroupCommit:
    """`begin`: the transaction a batch runs in (`Database.transaction`, or `Database.reading`
    for reads that share one snapshot)."""

    def __init__(self, begin: Callable[[], AbstractAsyncContextManager[AsyncSession]]) -> None:
        self.begin = begin
        self._pending: list[_Pending] = []
        self._writer: asyncio.Task[None] | None = None

    async def run(self, work: Callable[[AsyncSession], Awaitable[T]]) -> T:
        """`work(session)`'s result, once the transaction it ran in has committed; what it
        raises is raised here (and nothing of it is written). `work` only touches the
        database: it may run twice (the first time rolled back, with another write's failure)."""
        return await self._enqueue(None, work)  # type: ignore[no-any-return]

    async def add(self, kind: Together[P, T], payload: P) -> T:
        """`kind`'s result for `payload`, written with the batch's other payloads of it."""
        return await self._enqueue(kind, payload)  # type: ignore[no-any-return]

    async def _enqueue(self, kind: Together[Any, Any] | None, item: Any) -> Any:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending.append(_Pending(kind, item, future))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(
                self._write(), name="group-commit"
            )
        return await future

    async def _write(self) -> None:
        batch: list[_Pending] = []
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                batch = [entry for entry in batch if not entry.future.done()]
                if len(batch) > 1 and await self._together(batch):
                    await self._let_them_follow()
                    continue
                for entry in batch:  # alone (or again, one by one, after a failure)
                    try:
                        async with self.begin() as session:
                            result = await self._results(session, [entry])
                    except Exception as exc:
                        if not entry.future.done():
                            entry.future.set_exception(exc)
                        continue
                    if not entry.future.done():
                        entry.future.set_result(result[0])
        except BaseException:  # the writer itself was cancelled: nobody may wait for ever
            for entry in [*batch, *self._pending]:
                if not entry.future.done():
                    entry.future.cancel()
            self._pending = []
            raise

    @staticmethod
    async def _let_them_follow() -> None:
        """A few turns of the loop before the next batch: the writers of the batch just
        committed go on to their next writes, and those join the next batch instead of
        waiting behind it. Without this, at 60 replies at once, one write that arrived first
        had a batch to itself at every step while the other 59 waited for it (bench/stream.py:
        the store of the user's message took a batch's time twice)."""
        for _ in range(FOLLOW_TURNS):
            await asyncio.sleep(0)

    async def _together(self, batch: list[_Pending]) -> bool:
        """Every write of `batch` in one transaction; False if any failed (none is written)."""
        try:
            async with self.begin() as session:
                results = await self._results(session, batch)
        except Exception:
            return False
        for entry, result in zip(batch, results, strict=True):
            if not entry.future.done():
                entry.future.set_result(result)
        return True

    @staticmethod
    async def _results(session: AsyncSession, batch: list[_Pending]) -> list[Any]:
        """Run the batch's writes: each kind's payloads together, other works one by one."""
        results: dict[int, Any] = {}
        kinds: dict[int, list[int]] = {}
        for index, entry in enumerate(batch):
            if entry.kind is None:
                results[index] = await entry.item(session)
            else:
                kinds.setdefault(id(entry.kind), []).append(index)
        for indexes in kinds.values():
            kind = batch[indexes[0]].kind
            assert kind is not None
            written = await kind.write(session, [batch[i].item for i in indexes])
            results.update(zip(indexes, written, strict=True))
        return [results[i] for i in range(len(batch))]
