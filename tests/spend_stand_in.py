"""A stand-in for the spend ledger (`bot.spend.ledger.Spend`) until its implementation lands
on main: one process, in memory, token limits only (no prices), the windows by the calendar
in UTC. Only what the pause's front-door tests need; the ledger has its own tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot import wiring
from bot.spend.budget_model import Budget
from bot.spend.ledger import Spend
from bot.spend.standing import Asker, Refused, Reservation, SoftCrossing, Standing, Tokens


def window_of(budget: Budget, now: datetime, turn_key: str) -> tuple[str, datetime | None]:
    day = now.date()
    if budget.window == "turn":
        return turn_key, None
    if budget.window == "day":
        start = datetime(day.year, day.month, day.day, tzinfo=UTC)
        return day.isoformat(), start + timedelta(days=1)
    if budget.window == "week":
        year, week, weekday = day.isocalendar()
        start = datetime(day.year, day.month, day.day, tzinfo=UTC) - timedelta(days=weekday - 1)
        return f"{year}-W{week:02d}", start + timedelta(days=7)
    following = datetime(day.year + day.month // 12, day.month % 12 + 1, 1, tzinfo=UTC)
    return f"{day.year}-{day.month:02d}", following


def applies(budget: Budget, asker: Asker) -> bool:
    scope = budget.scope
    return {
        "workspace": True,
        "per_turn": True,
        "channel": scope.channel == asker.channel_id,
        "user": scope.user == asker.user_id,
        "group": scope.group in asker.groups,
        "pack": scope.pack in asker.packs,
    }[scope.kind]


class StandInSpend(Spend):
    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.used: dict[tuple[str, str], int] = {}
        self.holds: dict[int, tuple[list[tuple[Budget, str, datetime | None]], int]] = {}
        self.told: set[tuple[str, str]] = set()
        self.settled: list[Tokens] = []  # what each settled call was charged

    def clock(self) -> datetime:
        return self.now() if self.now is not None else datetime.now(UTC)

    def _held(self, name: str, key: str) -> int:
        return sum(
            e for ws, e in self.holds.values() for b, k, _ in ws if (b.name, k) == (name, key)
        )

    def _standing(self, budget: Budget, key: str, resets: datetime | None) -> Standing:
        return Standing(
            budget.name, budget.scope.kind, budget.scope.value, budget.window, key, 0, 0,
            None, self.used.get((budget.name, key), 0), self._held(budget.name, key),
            budget.tokens, resets, "UTC", tuple(budget.owners), budget.fallback_model,
            budget.soft,
        )  # fmt: skip

    async def reserve(
        self, asker: Asker, model: str, prompt_tokens: int, max_tokens: int
    ) -> Reservation | Refused:
        estimate = prompt_tokens + max_tokens
        now = self.clock()
        found = [(b, *window_of(b, now, asker.turn_key)) for b in self.budgets()[0]]
        applying = [(b, k, r) for b, k, r in found if applies(b, asker)]
        if not applying:
            return Reservation(None, model, estimate, 0)
        for budget, key, resets in applying:
            if budget.fallback_model == model or budget.tokens is None:
                continue
            if self.used.get((budget.name, key), 0) + self._held(budget.name, key) + estimate > (
                budget.tokens
            ):
                return Refused(self._standing(budget, key, resets))
        held = len(self.holds) + 1
        self.holds[held] = (applying, estimate)
        return Reservation(held, model, estimate, 0)

    async def settle(
        self, reservation: Reservation, reported: Tokens | None, counted: Tokens
    ) -> list[SoftCrossing]:
        applying, _ = self.holds.pop(reservation.id or 0, ([], 0))
        used = reported or counted
        self.settled.append(used)
        crossings = []
        for budget, key, resets in applying:
            self.used[(budget.name, key)] = self.used.get((budget.name, key), 0) + used.total
            share = self.used[(budget.name, key)] / budget.tokens if budget.tokens else 0
            if budget.soft and share >= budget.soft and (budget.name, key) not in self.told:
                self.told.add((budget.name, key))
                crossings.append(SoftCrossing(self._standing(budget, key, resets)))
        return crossings

    async def standing(self, name: str, window_key: str | None = None) -> Standing | None:
        budget = next((b for b in self.budgets()[0] if b.name == name), None)
        if budget is None:
            return None
        key, resets = window_of(budget, self.clock(), window_key or "")
        return self._standing(budget, window_key or key, resets)


def use_stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bots built after this use the stand-in ledger."""
    monkeypatch.setattr(wiring, "Spend", StandInSpend)
