"""The spend ledger: reserve before each model call, settle to what the server reported.

CONTRACT (the conversation, the Slack surface, bench/budgets.py and the tests rely on it):
every method is safe across replicas sharing one database. A reservation holds its estimate
in every budget that applies, all or none, in one transaction that locks those budgets'
window rows (bot/spend/ledger_rows.py); settling and releasing are compare-and-set on the
reservation's state, so a call is charged exactly once. Calls reserving and settling at once
share a transaction (bot/spend/ledger_batch.py), each decided as if alone, in arrival order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import Decimal

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bot import metrics
from bot.db.group_commit import GroupCommit
from bot.db.models import SpendReservation
from bot.db.session import Database
from bot.spend import ledger_batch as batch
from bot.spend import ledger_calls as calls
from bot.spend import ledger_rows as rows
from bot.spend.budget_model import Budget
from bot.spend.prices import Prices
from bot.spend.standing import (
    Asker,
    Refused,
    Reservation,
    SoftCrossing,
    Standing,
    Tokens,
    nano_of,
    usd_of,
)
from bot.spend.standings import Standings
from bot.spend.windows import window_at, window_named

STALE_BATCH = 100  # reservations released per call of `release_stale`


class Spend(Standings):
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
        hold = calls.Hold(
            asker, model, tuple(applying), windows, nano, tokens, now, self.main_model
        )
        held = await self.writes.add(batch.LEDGER, hold)
        assert isinstance(held, calls.Held)
        if held.refused is not None:
            metrics.SPEND_REFUSALS.labels(held.refused.scope_kind).inc()
            return Refused(held.refused)
        for budget in applying:
            metrics.SPEND_RESERVATIONS.labels(budget.scope.kind, rows.HELD).inc()
        return Reservation(id=held.id, model=model, tokens=tokens, nano=nano)

    async def _locked(
        self, session: AsyncSession, keys: list[tuple[str, str]], now: datetime
    ) -> dict[tuple[str, str], rows.WindowRow]:
        locked = await rows.lock_rows(session, keys)
        if len(locked) < len(keys):
            # A window's first call: create its rows, then lock them all, in name order. On
            # PostgreSQL the rows locked above stay locked; creating and locking the rest in
            # name order can only wait on calls that lock in the same order.
            await rows.create_rows(session, [k for k in keys if k not in locked], now)
            locked = await rows.lock_rows(session, keys)
        return locked

    async def settle(
        self, reservation: Reservation, reported: Tokens | None, counted: Tokens
    ) -> list[SoftCrossing]:
        """Replace the hold by what was used: the server's reported usage, else `counted`
        (this side's count of the prompt and of what streamed). Idempotent. Returns the soft
        thresholds crossed for the first time in their window. Calls settling at once are
        charged together."""
        if reservation.id is None:
            return []
        used = reported if reported is not None else counted
        nano = self.prices.nano(reservation.model, used.prompt, used.completion, used.cached)
        source = "reported" if reported is not None else "counted"
        charged = await self._charge(reservation.id, rows.SETTLED, used, nano, source)
        return list(charged.crossings)

    async def _charge(
        self, reservation_id: int, state: str, used: Tokens | None, nano: int, source: str
    ) -> calls.Charged:
        """Move a held reservation to `state` and charge it (compare-and-set: once); metrics
        once it committed."""
        budgets, tz = self.budgets()
        charge = calls.Charge(
            reservation_id, state, used, nano, source, tuple(budgets), tz, self._now()
        )
        charged = await self.writes.add(batch.LEDGER, charge)
        assert isinstance(charged, calls.Charged)
        for scope in charged.scopes:
            metrics.SPEND_RESERVATIONS.labels(scope, state).inc()
            metrics.SPEND_USD.labels(scope).inc(float(usd_of(charged.nano)))
            metrics.SPEND_TOKENS.labels(scope).inc(charged.tokens)
        return charged

    async def raise_limit(
        self,
        name: str,
        window_key: str,
        usd: Decimal | None,
        tokens: int | None,
        key: str | None = None,
    ) -> Standing:
        """Add to the budget's limits for that window only (an approved raise). `key` (the
        approval's idempotency key; required in practice) makes applying it twice add once.
        `ValueError` if no budget is so named."""
        budgets, tz = self.budgets()
        budget = next((b for b in budgets if b.name == name), None)
        if budget is None:
            raise ValueError(f"no budget is named {name!r}")
        nano, more = (nano_of(usd) if usd is not None else 0), tokens or 0
        now = self._now()
        async with self.db.transaction() as session:
            row = (await self._locked(session, [(name, window_key)], now))[(name, window_key)]
            if key is None or await rows.record_raise(
                session, key, name, window_key, nano, more, now
            ):
                await rows.add_to(session, [row.id], 0, 0, raised_nano=nano, raised_tokens=more)
                row.raised_nano += nano
                row.raised_tokens += more
        return rows.standing_of(budget, window_named(budget, tz, window_key), row)

    async def raise_to(
        self,
        name: str,
        window_key: str,
        usd: Decimal | None,
        tokens: int | None,
        key: str,
    ) -> Standing:
        """Raise the budget's limits for that window TO these values (an approved raise shows
        "to $24.00"): what is missing is computed under the window's lock, so two raises
        approved at once end at the higher of them, never at their sum; a limit already at or
        over a value is left as it is. `key` (the approval's idempotency key) applies it once.
        `ValueError` if no budget is so named."""
        budgets, tz = self.budgets()
        budget = next((b for b in budgets if b.name == name), None)
        if budget is None:
            raise ValueError(f"no budget is named {name!r}")
        now = self._now()
        async with self.db.transaction() as session:
            row = (await self._locked(session, [(name, window_key)], now))[(name, window_key)]
            money_limit, token_limit = rows.limits(budget, row)
            nano = 0
            if usd is not None and money_limit is not None:
                nano = max(0, nano_of(usd) - money_limit)
            more = 0
            if tokens is not None and token_limit is not None:
                more = max(0, tokens - token_limit)
            if (nano or more) and await rows.record_raise(
                session, key, name, window_key, nano, more, now
            ):
                await rows.add_to(session, [row.id], 0, 0, raised_nano=nano, raised_tokens=more)
                row.raised_nano += nano
                row.raised_tokens += more
        return rows.standing_of(budget, window_named(budget, tz, window_key), row)

    async def release_stale(self, older_than: timedelta) -> int:
        """Release holds left by calls that never settled (a crashed process): each is
        charged its whole estimate, so spend is never under-counted. One transaction per
        reservation, so the windows are locked in the one order."""
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
        charged = await asyncio.gather(
            *(self._charge(i, rows.RELEASED, None, 0, "estimate") for i in stale)
        )
        return sum(1 for c in charged if c.scopes)  # the others were settled meanwhile
