"""The spend ledger: reserve before each model call, settle to what the server reported.

CONTRACT (the conversation, the Slack surface, bench/budgets.py and the tests rely on it):
every method is safe across replicas sharing one database. A reservation holds its estimate
in every budget that applies, all or none, in one transaction that locks those budgets'
window rows (bot/spend/ledger_rows.py); settling and releasing are compare-and-set on the
reservation's state, so a call is charged exactly once.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import CursorResult, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot import metrics
from bot.db.models import SpendReservation
from bot.spend import ledger_rows as rows
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
    """Reserve, settle, raise and release (the reads are `Standings`')."""

    async def reserve(
        self, asker: Asker, model: str, prompt_tokens: int, max_tokens: int
    ) -> Reservation | Refused:
        """Hold `prompt_tokens + max_tokens` (and their price on `model`) against every budget
        that applies to `asker`, atomically: all or none, and never past a hard limit however
        many calls reserve at once on however many replicas. A budget never refuses a call
        on its own `fallback_model` (the call still counts in it): that is what "Continue on
        a cheaper model" relies on. No budget applies: no database round trip."""
        tokens = prompt_tokens + max_tokens
        nano = self.prices.nano(model, prompt_tokens, max_tokens)
        applying = self.applying(asker)
        if not applying:
            return Reservation(id=None, model=model, tokens=tokens, nano=nano)
        now = self._now()
        tz = self.budgets()[1]
        at = {b.name: window_at(b, tz, now, asker.turn_key) for b in applying}
        keys = [(b.name, at[b.name].key) for b in applying]
        async with self.db.transaction() as session:
            locked = await self._locked(session, keys, now)
            for budget in applying:
                row = locked[(budget.name, at[budget.name].key)]
                if budget.fallback_model != model and not rows.has_room(budget, row, nano, tokens):
                    metrics.SPEND_REFUSALS.labels(budget.scope.kind).inc()
                    return Refused(rows.standing_of(budget, at[budget.name], row))
            await rows.add_to(session, [locked[key].id for key in keys], nano, tokens)
            holds = [
                {"window": locked[key].id, "budget": b.name, "scope": b.scope.kind}
                for key, b in zip(keys, applying, strict=True)
            ]
            inserted: CursorResult[Any] = await session.execute(  # type: ignore[assignment]
                insert(SpendReservation).values(
                    model=model,
                    state=rows.HELD,
                    team_id=asker.team_id,
                    user_id=asker.user_id,
                    turn_key=asker.turn_key,
                    holds=holds,
                    estimate_nano=nano,
                    estimate_tokens=tokens,
                    created_at=now,
                )
            )
            (reservation_id,) = inserted.inserted_primary_key or (None,)
        for budget in applying:
            metrics.SPEND_RESERVATIONS.labels(budget.scope.kind, rows.HELD).inc()
        return Reservation(id=reservation_id, model=model, tokens=tokens, nano=nano)

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
        thresholds crossed for the first time in their window."""
        if reservation.id is None:
            return []
        used = reported if reported is not None else counted
        nano = self.prices.nano(reservation.model, used.prompt, used.completion, used.cached)
        now = self._now()
        async with self.db.transaction() as session:
            claimed = await self._claim(
                session,
                reservation.id,
                rows.SETTLED,
                now,
                prompt_tokens=used.prompt,
                completion_tokens=used.completion,
                charged_nano=nano,
                charged_from="reported" if reported is not None else "counted",
            )
            if claimed is None:
                return []
            return await self._charge(session, claimed, nano, used.total, rows.SETTLED, now)

    async def _claim(
        self, session: AsyncSession, reservation_id: int, state: str, now: datetime, **values: Any
    ) -> rows.Claimed | None:
        """Move a held reservation to `state` (compare-and-set); None if it was not held."""
        result = await session.execute(
            update(SpendReservation)
            .where(SpendReservation.id == reservation_id, SpendReservation.state == rows.HELD)
            .values(state=state, settled_at=now, **values)
            .returning(
                SpendReservation.holds,
                SpendReservation.estimate_nano,
                SpendReservation.estimate_tokens,
            )
            .execution_options(synchronize_session=False)
        )
        found = result.first()
        return None if found is None else rows.Claimed(*found)

    async def _charge(
        self,
        session: AsyncSession,
        claimed: rows.Claimed,
        nano: int,
        tokens: int,
        event: str,
        now: datetime,
    ) -> list[SoftCrossing]:
        """Swap the reservation's hold for its charge in each window it held; claim each soft
        notice this charge brings due (compare-and-set on the window's marker)."""
        ids = [int(hold["window"]) for hold in claimed.holds]
        charged = await rows.lock_and_add_to(
            session,
            ids,
            -claimed.estimate_nano,
            -claimed.estimate_tokens,
            used_nano=nano,
            used_tokens=tokens,
        )
        for hold in claimed.holds:
            scope = str(hold["scope"])
            metrics.SPEND_RESERVATIONS.labels(scope, event).inc()
            metrics.SPEND_USD.labels(scope).inc(float(usd_of(nano)))
            metrics.SPEND_TOKENS.labels(scope).inc(tokens)
        budgets, tz = self.budgets()
        by_name = {b.name: b for b in budgets}
        crossings: list[SoftCrossing] = []
        for row in charged:
            budget = by_name.get(row.budget)
            if budget is None or budget.soft is None or row.soft_noticed_at is not None:
                continue
            at = window_named(budget, tz, row.window_key)
            if budget.window != "turn" and at.key != window_at(budget, tz, now, "").key:
                continue  # a window already over: nobody needs a notice about it
            if rows.past_soft(budget, row) and await rows.claim_soft_notice(session, row.id, now):
                crossings.append(SoftCrossing(rows.standing_of(budget, at, row)))
        return crossings

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
        released = 0
        for reservation_id in stale:
            async with self.db.transaction() as session:
                claimed = await self._claim(
                    session, reservation_id, rows.RELEASED, now, charged_from="estimate"
                )
                if claimed is None:
                    continue  # settled meanwhile
                await session.execute(
                    update(SpendReservation)
                    .where(SpendReservation.id == reservation_id)
                    .values(charged_nano=claimed.estimate_nano)
                    .execution_options(synchronize_session=False)
                )
                await self._charge(
                    session,
                    claimed,
                    claimed.estimate_nano,
                    claimed.estimate_tokens,
                    rows.RELEASED,
                    now,
                )
                released += 1
        return released
