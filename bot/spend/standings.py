"""What the ledger shows: every budget that applies to someone, the budgets a person owns,
one budget in one window. Reads take no lock (a snapshot: `Database.reading`), so /usage and
the App Home never wait behind calls being reserved."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from bot.db.models import utcnow
from bot.db.session import Database
from bot.spend import ledger_rows as rows
from bot.spend.budget_model import Budget
from bot.spend.prices import Prices
from bot.spend.standing import Asker, Standing
from bot.spend.windows import WindowAt, window_at, window_named


class Standings:
    def __init__(
        self,
        db: Database,
        budgets: Callable[[], tuple[list[Budget], str]],
        prices: Prices,
        now: Callable[[], datetime] | None = None,
    ) -> None:
        """`budgets`: the budgets in force and the file's time zone, read at every call (a
        reload applies at once, mid-window too)."""
        self.db = db
        self.budgets = budgets
        self.prices = prices
        self.now = now

    def _now(self) -> datetime:
        return self.now() if self.now is not None else utcnow()

    @property
    def any(self) -> bool:
        """Whether any budget is configured (no budget: `reserve` costs nothing)."""
        return bool(self.budgets()[0])

    def applying(self, asker: Asker) -> list[Budget]:
        """The budgets that count a call for `asker`, in name order (the locking order)."""
        return sorted(
            (b for b in self.budgets()[0] if rows.applies(b, asker)), key=lambda b: b.name
        )

    async def standings(self, asker: Asker) -> list[Standing]:
        """Every budget that applies to `asker`, in its current window."""
        tz = self.budgets()[1]
        now = self._now()
        return await self._read(
            [(b, window_at(b, tz, now, asker.turn_key)) for b in self.applying(asker)]
        )

    async def owned(self, user_id: str, groups: frozenset[str]) -> list[Standing]:
        """The budgets `user_id` owns (named, or through one of `groups`). A per-turn budget
        is shown with its limits only (its window is each turn)."""
        budgets, tz = self.budgets()
        now = self._now()
        mine = {user_id} | groups
        return await self._read(
            [
                (b, window_at(b, tz, now, ""))
                for b in sorted(budgets, key=lambda b: b.name)
                if mine & set(b.owners)
            ]
        )

    async def standing(self, name: str, window_key: str | None = None) -> Standing | None:
        """One budget in one window (default: the current one); None if no such budget."""
        budgets, tz = self.budgets()
        budget = next((b for b in budgets if b.name == name), None)
        if budget is None:
            return None
        at = (
            window_at(budget, tz, self._now(), "")
            if window_key is None
            else window_named(budget, tz, window_key)
        )
        (found,) = await self._read([(budget, at)])
        return found

    async def _read(self, wanted: list[tuple[Budget, WindowAt]]) -> list[Standing]:
        if not wanted:
            return []
        async with self.db.reading() as session:
            found = await rows.read_rows(session, [(b.name, at.key) for b, at in wanted])
        return [rows.standing_of(b, at, found.get((b.name, at.key))) for b, at in wanted]
