"""The spend ledger: reserve before each model call, settle to what the server reported.

CONTRACT (the conversation, the Slack surface, bench/budgets.py and the tests rely on it):
every method is safe across replicas sharing one database. A reservation holds its estimate
in every budget that applies, all or none, and no call is held past a hard limit however many
reserve at once on however many replicas: for every window, used + reserved + leased never
passes the limit (+ raises), because room is held only under the window rows' locks
(bot/spend/ledger_rows.py), either for one call or as a lease, a process's share that its
calls then take from in memory with no await (bot/spend/leases.py). A process's own lease
counts as free when it takes the locked path, and a call is refused only once other
processes' leases were asked for their unused room back. Settling never waits for the
database: charges are written behind by the process's flusher (bot/spend/flusher.py), each
once (compare-and-set on the reservation's state, or written settled in the first place);
soft thresholds are decided there under the lock and delivered to `on_soft`. Reads
(`standings`, `standing`, `owned`) write this process's pending work first. Calls on the
locked path meet in one transaction (bot/spend/ledger_batch.py), each decided as if alone,
in arrival order. `close` (shutdown) writes what is pending and gives the leases back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import datetime, timedelta
from functools import partial

from sqlalchemy import select

from bot import metrics
from bot.db.group_commit import GroupCommit
from bot.db.models import SpendLease, SpendReservation
from bot.db.session import Database
from bot.spend import ledger_batch as batch
from bot.spend import ledger_calls as calls
from bot.spend import ledger_rows as rows
from bot.spend.budget_model import Budget
from bot.spend.flusher import Flusher
from bot.spend.leases import INTERVAL, LAPSE, RETRIES
from bot.spend.ledger_leases import charge_lapsed
from bot.spend.ledger_raises import Raises
from bot.spend.prices import Prices
from bot.spend.soft_delivery import count
from bot.spend.standing import (
    Asker,
    Refused,
    Reservation,
    SoftCrossing,
    Standing,
    Tokens,
)
from bot.spend.windows import WindowAt, window_at

STALE_BATCH = 100  # reservations released per call of `release_stale`


class Spend(Raises):
    """Reserve, settle, raise and release (the reads are `Standings`').

    Holds and charges arriving at once are written together (`writes`, a group commit). On
    SQLite that is `Database.group`, with every other small write: one writer at a time
    either way, and a call joins the batch being gathered instead of queueing behind it. On
    PostgreSQL the ledger has a group of its own, so its batches run beside the others on
    another connection: in `Database.group` a settle waited behind batches of other turns'
    writes (40 paused turns' rows and journal rows, one statement each; bench/budgets.py
    settle p50 211 ms there, 50 ms on its own)."""

    def __init__(
        self,
        db: Database,
        budgets: Callable[[], tuple[list[Budget], str]],
        prices: Prices,
        now: Callable[[], datetime] | None = None,
        main_model: str | None = None,
    ) -> None:
        """`main_model`: the configured model (`LLM_MODEL`), which no budget's
        `fallback_model` exempts from its limit."""
        super().__init__(db, budgets, prices, now)
        self.main_model = main_model
        self._writes: GroupCommit | None = None  # made at the first write: no budget, no database
        self.flusher = Flusher(self)

    @property
    def on_soft(self) -> Callable[[SoftCrossing], Awaitable[None]] | None:
        """Told of each soft threshold crossed (once a window, across replicas)."""
        return self.flusher.soft.on_soft

    @on_soft.setter
    def on_soft(self, deliver: Callable[[SoftCrossing], Awaitable[None]] | None) -> None:
        self.flusher.soft.on_soft = deliver

    def current_time(self) -> datetime:
        return self._now()

    async def _read(self, wanted: list[tuple[Budget, WindowAt]]) -> list[Standing]:
        await self.flusher.flush(renew=False)  # this process reads its own writes (in flight too)
        return await super()._read(wanted)

    async def flush(self) -> None:
        """Write what this process did in memory (and renew its leases) now."""
        await self.flusher.flush()

    async def close(self) -> None:
        """Shutdown: write what is pending, give the leases back."""
        await self.flusher.close()

    @property
    def writes(self) -> GroupCommit:
        if self._writes is None:
            sqlite = self.db.engine.url.get_backend_name() == "sqlite"
            self._writes = self.db.group if sqlite else GroupCommit(self.db.transaction)
        return self._writes

    async def reserve(
        self, asker: Asker, model: str, prompt_tokens: int, max_tokens: int
    ) -> Reservation | Refused:
        """Hold `prompt_tokens + max_tokens` (and their price on `model`) against every budget
        that applies to `asker`, atomically: all or none, and never past a hard limit however
        many calls reserve at once on however many replicas. A budget never refuses a call
        on its own `fallback_model` (the call still counts in it): that is what "Continue on
        a cheaper model" relies on; unless that is the configured model (`main_model`). No
        budget applies: no database round trip. Calls reserving at once are decided together,
        in arrival order (bot/spend/ledger_batch.py)."""
        tokens = prompt_tokens + max_tokens
        nano = self.prices.nano(model, prompt_tokens, max_tokens)
        applying = self.applying(asker)
        if not applying:
            return Reservation(id=None, model=model, tokens=tokens, nano=nano)
        now = self._now()
        tz = self.budgets()[1]
        windows = tuple(window_at(b, tz, now, asker.turn_key) for b in applying)
        book = self.flusher.book
        hold = calls.Hold(
            asker,
            model,
            tuple(applying),
            windows,
            nano,
            tokens,
            now,
            self.main_model,
            holder=book.holder,
            lease=all(b.window != "turn" for b in applying),
        )
        ticket = book.take(hold)  # the fast path: no await at all
        if ticket is None:
            return await self._reserve_locked(hold)
        return self._taken(hold, ticket)

    def _taken(self, hold: calls.Hold, ticket: calls.Ticket) -> Reservation:
        ticket.owner = self.flusher
        self.flusher.kick()
        for budget in hold.budgets:
            metrics.SPEND_RESERVATIONS.labels(budget.scope.kind, rows.HELD).inc()
        return Reservation(None, hold.model, hold.tokens, hold.nano, ticket)

    async def _reserve_locked(self, hold: calls.Hold) -> Reservation | Refused:
        """The locked path; refused while other processes' leases hold room: decided again
        (they were asked to give it back), at most RETRIES times, INTERVAL apart."""
        for attempt in range(RETRIES + 1):
            held = await self._decide(hold)
            if held.refused is None:
                for budget in hold.budgets:
                    metrics.SPEND_RESERVATIONS.labels(budget.scope.kind, rows.HELD).inc()
                return Reservation(held.id, hold.model, hold.tokens, hold.nano)
            if not held.retry or attempt == RETRIES:
                break
            await asyncio.sleep(INTERVAL)
            ticket = self.flusher.book.take(hold)  # a lease granted here meanwhile
            if ticket is not None:
                return self._taken(hold, ticket)
        assert held.refused is not None
        metrics.SPEND_REFUSALS.labels(held.refused.scope_kind).inc()
        return Refused(held.refused)

    async def _decide(self, hold: calls.Hold) -> calls.Held:
        """One locked decision. This process's own lease room on the call's windows is given
        back first (counted as free), and what it did in memory and its pending settles are
        written in the same batch, before it: the call is decided on the windows as they
        truly are. What the batch did is taken in as soon as it commits, even if this call
        was cancelled meanwhile."""
        book = self.flusher.book
        sent = replace(hold, returned=book.freeze(hold.keys))

        def done(task: asyncio.Future[calls.Held | calls.Charged | calls.Flushed]) -> None:
            if task.cancelled():
                return  # not known whether it committed: the room stays out (never over)
            if task.exception() is not None:
                book.thaw(sent.returned)  # rolled back: the room is still this process's
                return
            held = task.result()
            assert isinstance(held, calls.Held)
            book.granted(held.grants, sent)
            if held.grants:
                self.flusher.kick()

        flusher = self.flusher
        pending = flusher.begin(renew=False, probes=[])  # written first, in the same batch
        if pending is not None:
            flusher.send(pending).add_done_callback(
                lambda w: flusher.soft.deliver(flusher.finish(pending, w.result()))
            )
        task = asyncio.ensure_future(self.writes.add(batch.LEDGER, sent))
        task.add_done_callback(done)
        held = await asyncio.shield(task)
        assert isinstance(held, calls.Held)
        return held

    async def settle(
        self, reservation: Reservation, reported: Tokens | None, counted: Tokens
    ) -> list[SoftCrossing]:
        """Replace the hold by what was used: the server's reported usage, else `counted`
        (this side's count of the prompt and of what streamed). Idempotent, and it does not
        wait for the database: the charge is written behind, by the flusher of the process
        that reserved the call (bot/spend/flusher.py). Soft thresholds crossed go to
        `on_soft`; the list returned is empty (kept for callers written before)."""
        if not reservation.counted:
            return []
        used = reported if reported is not None else counted
        nano = self.prices.nano(reservation.model, used.prompt, used.completion, used.cached)
        source = "reported" if reported is not None else "counted"
        ticket = reservation.ticket
        if isinstance(ticket, calls.Ticket):
            flusher = ticket.owner if isinstance(ticket.owner, Flusher) else self.flusher
            flusher.settled(ticket, used, nano, source)
        elif reservation.id is not None:
            budgets, tz = self.budgets()
            now = self._now()
            charge = calls.Charge(
                reservation.id, rows.SETTLED, used, nano, source, tuple(budgets), tz, now
            )
            self.flusher.charge(charge)
        return []

    async def _charge(
        self, reservation_id: int, state: str, used: Tokens | None, nano: int, source: str
    ) -> calls.Charged:
        """Move a held reservation to `state` and charge it now (compare-and-set: once);
        metrics once it committed."""
        budgets, tz = self.budgets()
        charge = calls.Charge(
            reservation_id, state, used, nano, source, tuple(budgets), tz, self._now()
        )
        charged = await self.writes.add(batch.LEDGER, charge)
        assert isinstance(charged, calls.Charged)
        count(charged.scopes, state, charged.nano, charged.tokens)
        return charged

    async def release_stale(self, older_than: timedelta, leases: timedelta = LAPSE) -> int:
        """Release holds left by calls that never settled (a crashed process): each is
        charged its whole estimate, so spend is never under-counted. One transaction per
        reservation, so the windows are locked in the one order. Leases not renewed for
        `leases` (their holder died) are charged whole too: what it took is unknown."""
        now = self._now()
        async with self.db.reading() as session:
            stale = list(
                await session.scalars(
                    select(SpendReservation.id)
                    .where(
                        SpendReservation.state == rows.HELD,
                        SpendReservation.created_at < now - older_than,
                    )
                    .order_by(SpendReservation.id)
                    .limit(STALE_BATCH)
                )
            )
            lapsed = list(
                await session.execute(
                    select(SpendLease.id, SpendLease.window_id)
                    .where(
                        SpendLease.renewed_at < now - leases,  # empty ones are removed
                        SpendLease.holder != self.flusher.book.holder,  # alive: it is us
                    )
                    .order_by(SpendLease.id)
                    .limit(STALE_BATCH)
                )
            )
        for lease_id, window_id in lapsed:
            await self.writes.run(partial(charge_lapsed, lease_id, window_id, now - leases))
        charged = await asyncio.gather(
            *(self._charge(i, rows.RELEASED, None, 0, "estimate") for i in stale)
        )
        return sum(1 for c in charged if c.scopes)  # the others were settled meanwhile
