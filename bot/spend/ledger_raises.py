"""Approved raises of a budget's limits for one window (issue 29's "Ask to raise"), applied
under the window row's lock, once per approval (its idempotency key)."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from sqlalchemy.ext.asyncio import AsyncSession

from bot.spend import ledger_rows as rows
from bot.spend.standing import Standing, nano_of
from bot.spend.standings import Standings
from bot.spend.windows import window_named


class Raises(Standings):
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
        "to $24.00"): compared under the window's lock, so two raises approved at once end at
        the higher of them, never at their sum; a limit already at or over a value is left as
        it is. The value is kept as such (`rows.limits`): a later reload of the policy file
        never stacks on it. `key` (the approval's idempotency key) applies it once.
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
            ):  # the record keeps what the raise added when it was applied
                to_nano = nano_of(usd) if nano and usd is not None else None
                to_tokens = tokens if more else None
                await rows.set_raised_to(session, row.id, to_nano, to_tokens)
                row.raised_to_nano = to_nano if to_nano is not None else row.raised_to_nano
                row.raised_to_tokens = to_tokens if to_tokens is not None else row.raised_to_tokens
        return rows.standing_of(budget, window_named(budget, tz, window_key), row)
