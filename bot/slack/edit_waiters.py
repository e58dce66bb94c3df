"""Who waits on the `chat.update` budget (`bot.slack.edit_budget`): an editor (a live reply
or an approval card), its lane, its place in the queue, and the queue itself: waiters granted
one at a time by a dispatcher task that asks the budget's rules (`WaiterQueue._step`) what may
go now, and sleeps until then or until something changes."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol


class Editor(Protocol):
    """What the budget needs to know about a reply that wants to edit."""

    @property
    def wants_final(self) -> bool: ...

    @property
    def last_edit_at(self) -> float | None: ...


def lane_of(editor: Editor) -> str:
    """ "reply" unless the editor says otherwise (approval cards say "card")."""
    return str(getattr(editor, "lane", "reply"))


class BudgetClosed(RuntimeError):
    """The process is shutting down; no more edits will be granted."""


@dataclass(order=True)
class Waiter:
    """A reply waiting for its turn to edit, in arrival order (`seq`)."""

    seq: int
    editor: Editor = field(compare=False)
    future: asyncio.Future[None] = field(compare=False)


class WaiterQueue:
    """The waiting and granting; which waiter goes when is `_step`'s to say. A cancelled
    waiter leaves the queue; `stop` fails every waiter with `BudgetClosed` at once."""

    def __init__(self, name: str, clock: Callable[[], float] = time.monotonic) -> None:
        self._name = name  # the dispatcher task's
        self._clock = clock
        self._waiters: list[Waiter] = []
        self._seq = itertools.count()
        self._wake = asyncio.Event()
        self._dispatcher: asyncio.Task[None] | None = None
        self.closed = False

    async def acquire(self, editor: Editor) -> None:
        """Wait for permission to make one call."""
        if self.closed:
            raise BudgetClosed("this process is shutting down")
        loop = asyncio.get_running_loop()
        waiter = Waiter(next(self._seq), editor, loop.create_future())
        self._waiters.append(waiter)
        self._ensure_dispatcher()
        self._wake.set()
        try:
            await waiter.future
        except asyncio.CancelledError:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
            raise

    def poke(self) -> None:
        """Something about a waiter changed (e.g. it now wants its final edit)."""
        self._wake.set()

    async def stop(self) -> None:
        """Grant nothing more; every waiter is told at once instead of waiting on."""
        self.closed = True
        if self._dispatcher is not None:
            self._dispatcher.cancel()
            await asyncio.gather(self._dispatcher, return_exceptions=True)
        for waiter in self._waiters:
            if not waiter.future.done():
                waiter.future.set_exception(BudgetClosed("this process is shutting down"))
        self._waiters.clear()

    def _grant(self, waiter: Waiter) -> None:
        self._waiters.remove(waiter)
        if not waiter.future.done():
            waiter.future.set_result(None)

    def _still_waiting(self, waiters: list[Waiter]) -> list[Waiter]:
        """Those of `waiters` still waiting. A shared window (Redis) is asked over the network:
        while it answers, a waiter may stop waiting (a native reply's append given up for its
        stop); granting it then killed the dispatcher (seen on three replicas: every later
        edit of that process waited for a new caller to start another)."""
        return [w for w in waiters if w in self._waiters and not w.future.done()]

    async def _step(self, now: float) -> float | None:
        """Grant what may go now; return seconds until something may change (None: idle)."""
        raise NotImplementedError

    def _ensure_dispatcher(self) -> None:
        if self._dispatcher is None or self._dispatcher.done():
            self._dispatcher = asyncio.get_running_loop().create_task(
                self._dispatch(), name=self._name
            )

    async def _dispatch(self) -> None:
        while True:
            self._wake.clear()
            delay = await self._step(self._clock())
            if delay == 0.0:
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=delay)
