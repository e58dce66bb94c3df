"""The window rows a ledger batch (bot/spend/ledger_batch.py) locked, as the calls decided so
far leave them, and how what it moved is written: one UPDATE per row changed."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Table, bindparam, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.db.models import SpendWindow
from bot.spend import ledger_rows as rows
from bot.spend.budget_model import Budget
from bot.spend.standing import SoftCrossing
from bot.spend.windows import window_at, window_named

WINDOWS: Table = SpendWindow.__table__  # type: ignore[assignment]


@dataclass
class Delta:
    reserved_nano: int = 0
    reserved_tokens: int = 0
    used_nano: int = 0
    used_tokens: int = 0
    leased_nano: int = 0
    leased_tokens: int = 0
    reclaim: int = 0


class Windows:
    """The batch's window rows, locked, as the calls decided so far leave them."""

    def __init__(self, locked: dict[tuple[str, str], rows.WindowRow]) -> None:
        self.by_key = locked
        self.by_id = {row.id: row for row in locked.values()}
        self.deltas: dict[int, Delta] = {}
        self.noticed: list[int] = []

    def add(self, row: rows.WindowRow, nano: int, tokens: int, used: bool) -> None:
        delta = self.deltas.setdefault(row.id, Delta())
        if used:
            row.used_nano += nano
            row.used_tokens += tokens
            delta.used_nano += nano
            delta.used_tokens += tokens
        else:
            row.reserved_nano += nano
            row.reserved_tokens += tokens
            delta.reserved_nano += nano
            delta.reserved_tokens += tokens

    def lease(self, row: rows.WindowRow, nano: int, tokens: int) -> None:
        """Add to the room held as leases (negative: given back or taken by calls)."""
        delta = self.deltas.setdefault(row.id, Delta())
        row.leased_nano += nano
        row.leased_tokens += tokens
        delta.leased_nano += nano
        delta.leased_tokens += tokens

    def bump(self, row: rows.WindowRow) -> None:
        """Ask every holder of a lease on `row` to give back its unused room (once a batch)."""
        delta = self.deltas.setdefault(row.id, Delta())
        if not delta.reclaim:
            delta.reclaim = 1
            row.reclaim += 1

    def notice(
        self, row: rows.WindowRow, budget: Budget | None, timezone: str, now: datetime
    ) -> SoftCrossing | None:
        """The soft notice a charge on `row` brings due, taken (the row is locked: nobody
        else takes it); none for a window already over."""
        if budget is None or budget.soft is None or row.soft_noticed_at is not None:
            return None
        at = window_named(budget, timezone, row.window_key)
        if budget.window != "turn" and at.key != window_at(budget, timezone, now, "").key:
            return None  # a window already over: nobody needs a notice about it
        if not rows.past_soft(budget, row):
            return None
        row.soft_noticed_at = now
        self.noticed.append(row.id)
        return SoftCrossing(rows.standing_of(budget, at, row))


async def update_rows(session: AsyncSession, windows: Windows, now: datetime) -> None:
    """One UPDATE per window row changed (one executemany), adding what the batch moved."""
    changed = [(i, d) for i, d in windows.deltas.items() if d != Delta()]
    table = WINDOWS
    if changed:
        await session.execute(
            update(table)
            .where(table.c.id == bindparam("row"))
            .values(
                reserved_nano=table.c.reserved_nano + bindparam("d_reserved_nano"),
                reserved_tokens=table.c.reserved_tokens + bindparam("d_reserved_tokens"),
                used_nano=table.c.used_nano + bindparam("d_used_nano"),
                used_tokens=table.c.used_tokens + bindparam("d_used_tokens"),
                leased_nano=table.c.leased_nano + bindparam("d_leased_nano"),
                leased_tokens=table.c.leased_tokens + bindparam("d_leased_tokens"),
                reclaim=table.c.reclaim + bindparam("d_reclaim"),
                version=table.c.version + 1,
            ),
            [
                {
                    "row": i,
                    "d_reserved_nano": d.reserved_nano,
                    "d_reserved_tokens": d.reserved_tokens,
                    "d_used_nano": d.used_nano,
                    "d_used_tokens": d.used_tokens,
                    "d_leased_nano": d.leased_nano,
                    "d_leased_tokens": d.leased_tokens,
                    "d_reclaim": d.reclaim,
                }
                for i, d in changed
            ],
        )
    if windows.noticed:
        await session.execute(
            update(table)
            .where(table.c.id.in_(windows.noticed), table.c.soft_noticed_at.is_(None))
            .values(soft_noticed_at=now)
        )
