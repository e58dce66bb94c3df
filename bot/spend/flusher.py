"""The ledger's writer behind the calls (bot/spend/leases.py): one task per process, every
INTERVAL while it holds leases or has something to write.

Each round writes, in one transaction (a ledger batch, bot/spend/ledger_batch.py): the calls
taken from leases (held, or settled already), the settles of calls written before, the room
given back, the leases' renewal; and it keeps the leases true to the policy: a lease whose
budget a reload changed is given back and sized again under the budget in force (a lowered
limit never leaves a lease above it), one whose window is over or that nobody used for IDLE
seconds is given back, one whose window's reclaim generation moved (a call refused elsewhere)
is given back whole, and one running out while still used is topped up.

Soft thresholds are decided under the window's lock as the charges are written, and delivered
to `on_soft` (the wiring's owner notices): settling no longer waits for the database.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import delete, select

from bot.db.models import SpendLease, SpendWindow
from bot.spend import ledger_rows as rows
from bot.spend.budget_model import Budget
from bot.spend.leases import IDLE, INTERVAL, Book
from bot.spend.ledger_batch import LEDGER, Call
from bot.spend.ledger_calls import Charge, Charged, Flush, Flushed, Held, Hold, Ticket
from bot.spend.soft_delivery import SoftDelivery, count
from bot.spend.standing import Asker, SoftCrossing, Tokens
from bot.spend.windows import window_at

if TYPE_CHECKING:
    from bot.spend.ledger import Spend

log = logging.getLogger(__name__)
NOBODY = Asker("", "", "", frozenset(), frozenset(), "")


@dataclass
class Round:
    """What one flush writes: `calls` (a `Flush`, the charges, the probes), and what they
    were made of, to take their results in (`Flusher.finish`)."""

    tickets: list[tuple[Ticket, bool]]
    returned: tuple[tuple[int, int, int], ...]
    charges: list[Charge]
    probes: list[Hold]
    calls: list[Call]
    renew: bool


class Flusher:
    def __init__(self, spend: Spend) -> None:
        self.spend = spend
        self.book = Book()
        self.charges: list[Charge] = []  # settles of calls written before
        self.soft = SoftDelivery()  # delivered beside the calls, to the wiring's `on_soft`
        self._task: asyncio.Task[None] | None = None
        self._flushing = asyncio.Lock()
        self._closed = False
        self._sent: set[asyncio.Future[list[object]]] = set()

    @property
    def busy(self) -> bool:
        return self.book.busy or bool(self.charges)

    def kick(self) -> None:
        """Make sure the task runs (it stops once there is nothing left to do)."""
        if not self._closed and (self._task is None or self._task.done()):
            self._task = asyncio.get_running_loop().create_task(self._run(), name="spend-flusher")

    async def _run(self) -> None:
        pause = INTERVAL
        while self.busy and not self._closed:
            await asyncio.sleep(pause)
            try:
                await self.tick()
                pause = INTERVAL
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the next round tries again, less often
                log.warning("spend flush failed: %s", type(exc).__name__)
                pause = min(pause * 2, 5.0)

    def settled(self, ticket: Ticket, used: Tokens, nano: int, source: str) -> None:
        """A call taken from leases settled: charged at the next flush (once)."""
        if ticket.settled:
            return
        ticket.used, ticket.charged_nano, ticket.charged_from = used, nano, source
        ticket.settled = True
        if ticket.written and ticket.id is not None:
            self.charge(self._charge_of(ticket))
        self.kick()

    def charge(self, charge: Charge) -> None:
        self.charges.append(charge)
        self.kick()

    def _charge_of(self, ticket: Ticket) -> Charge:
        assert ticket.id is not None
        assert ticket.used is not None
        budgets, tz = self.spend.budgets()
        return Charge(
            ticket.id,
            rows.SETTLED,
            ticket.used,
            ticket.charged_nano,
            ticket.charged_from,
            tuple(budgets),
            tz,
            self.spend.current_time(),
        )

    async def tick(self) -> None:
        """One round: keep the leases true to the policy and the reclaims, then write."""
        budgets, tz = self.spend.budgets()
        by_name = {b.name: b for b in budgets}
        now = self.spend.current_time()
        current = {b.name: window_at(b, tz, now, "").key for b in budgets if b.window != "turn"}
        probes: dict[tuple[str, str], Hold] = {}
        for key in self.book.stale(by_name, current):
            lease = self.book.leases[key]
            budget = by_name.get(key[0])
            resize = (
                budget is not None
                and current.get(key[0]) == key[1]
                and time.monotonic() - lease.used_at < IDLE
            )
            self.book.give_back(key, drop=True)
            if resize and budget is not None:
                probes[key] = self._probe(budget, tz, key, lease.nano, lease.tokens)
        await self._reclaimed()
        for key in self.book.low():
            lease = self.book.leases[key]
            probes.setdefault(key, self._probe(lease.budget, tz, key, lease.nano, lease.tokens))
        await self.flush(renew=self.book.renew_due(), probes=list(probes.values()))

    def _probe(self, budget: Budget, tz: str, key: tuple[str, str], n: int, t: int) -> Hold:
        """A lease sized anew on one window, reserving nothing."""
        now = self.spend.current_time()
        at = window_at(budget, tz, now, "")
        return Hold(NOBODY, "", (budget,), (at,), n, t, now, None, self.book.holder, (), True, True)

    async def _reclaimed(self) -> None:
        """Give back whole the leases whose window's reclaim generation moved."""
        by_window = {lease.window_id: key for key, lease in self.book.leases.items()}
        if not by_window:
            return
        async with self.spend.db.reading() as session:
            found = await session.execute(
                select(SpendWindow.id, SpendWindow.reclaim).where(
                    SpendWindow.id.in_(sorted(by_window))
                )
            )
        for window_id, reclaim in found:
            key = by_window[int(window_id)]
            if int(reclaim) != self.book.leases[key].seen:
                self.book.give_back(key, drop=True)  # its next call takes the locked path

    async def flush(self, renew: bool = True, probes: list[Hold] | None = None) -> None:
        """Write what is pending now (and wait for a flush in flight); renew the leases. A
        call settled while it was being written is charged by a second pass."""
        for _ in range(3):
            async with self._flushing:
                pending = self.begin(renew, probes or [])
                renew, probes = False, None
                if pending is None:
                    if self._sent:  # written beside a locked call: wait for it all the same
                        await asyncio.wait(set(self._sent))
                    if not self.charges:
                        return
                    continue
                results = await asyncio.shield(self.send(pending))
                crossings = self.finish(pending, list(results))
            await self.soft.send_all(crossings)
            if isinstance(results[0], Exception):
                raise results[0]  # put back to be written again (later, less often)
            if not self.charges:
                return

    def send(self, pending: Round) -> asyncio.Future[list[object]]:
        """A round's writes, in the ledger's next batch; a flush waits for them too."""
        writes = self.spend.writes
        sent: asyncio.Future[list[object]] = asyncio.gather(
            *(writes.add(LEDGER, c) for c in pending.calls), return_exceptions=True
        )
        self._sent.add(sent)
        sent.add_done_callback(self._sent.discard)
        return sent

    def begin(self, renew: bool, probes: list[Hold]) -> Round | None:
        """What is pending, taken out to be written (None: nothing). Whoever writes it
        calls `finish` with the results, in the order of `Round.calls`."""
        tickets, returned = self.book.drain()
        charges, self.charges = self.charges, []
        renewing = tuple(sorted(lease.window_id for lease in self.book.leases.values()))
        renewing = renewing if renew else ()
        if not (tickets or returned or renewing or charges or probes):
            return None
        budgets, tz = self.spend.budgets()
        flush = Flush(
            self.book.holder,
            tuple(tickets),
            returned,
            renewing,
            tuple(budgets),
            tz,
            self.spend.current_time(),
        )
        return Round(tickets, returned, charges, probes, [flush, *charges, *probes], renew)

    def finish(self, pending: Round, results: list[object]) -> list[SoftCrossing]:
        """Take in what a round's writes did: the calls' ids, metrics, leases granted; the
        soft notices due (to `soft.deliver`)."""
        if pending.renew:
            self.book.renewed = time.monotonic()
        crossings: list[SoftCrossing] = []
        flushed = results[0]
        if isinstance(flushed, Flushed):
            crossings.extend(flushed.crossings)
            self._written(pending.tickets, flushed)
        else:
            self.book.restore(pending.tickets, pending.returned)
            log.warning("spend flush failed: %s", type(flushed).__name__)
        charges = pending.charges
        for charge, charged in zip(charges, results[1 : 1 + len(charges)], strict=True):
            if isinstance(charged, Charged):
                crossings.extend(charged.crossings)
                count(charged.scopes, charge.state, charged.nano, charged.tokens)
            else:  # the hold stays; release_stale charges it later
                log.warning("could not settle model call %s", charge.reservation_id)
        for probe, held in zip(pending.probes, results[1 + len(charges) :], strict=True):
            if isinstance(held, Held):
                self.book.granted(held.grants, probe)
        return crossings

    def _written(self, tickets: list[tuple[Ticket, bool]], flushed: Flushed) -> None:
        charged = iter(flushed.charged)
        for (ticket, settled), reservation_id in zip(tickets, flushed.ids, strict=True):
            if settled:
                scopes, nano, tokens = next(charged)
                count(scopes, rows.SETTLED, nano, tokens)
                continue
            ticket.id = reservation_id
            if ticket.settled:  # settled while it was being written
                self.charge(self._charge_of(ticket))

    async def close(self) -> None:
        """Shutdown: settles written, every lease given back and its row removed."""
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if not (self.busy or self.book.ever):
            return  # it never wrote anything
        for key in list(self.book.leases):
            self.book.give_back(key, drop=True)
        await self.flush(renew=False)
        if self.charges or self.book.tickets:
            await self.flush(renew=False)  # settled while the first was written
        holder = self.book.holder

        async def forget(session: object) -> None:
            await session.execute(  # type: ignore[attr-defined]
                delete(SpendLease).where(
                    SpendLease.holder == holder,
                    SpendLease.room_nano == 0,
                    SpendLease.room_tokens == 0,
                )
            )

        await self.spend.writes.run(forget)
