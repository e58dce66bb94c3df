"""A stand-in for the spend ledger's `standing` and `raise_limit` (bot/spend/ledger.py, being
built by another branch): budgets read from the policy in force, every budget used up to its
limit, raises kept in memory, once per idempotency key. Replace by the real ledger once it
lands (only these two methods are used by "Ask to raise")."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from bot.spend.ledger import Spend
from bot.spend.standing import Standing, nano_of

WINDOW = "2026-11-27"


@dataclass
class StubLedger:
    raised: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    keys: set[str] = field(default_factory=set)
    applied: list[tuple[str, str, Decimal | None, int | None, str]] = field(default_factory=list)
    calls: int = 0  # raise_limit calls, applied or not

    def install(self, monkeypatch: pytest.MonkeyPatch) -> StubLedger:
        for name, method in self.methods().items():
            monkeypatch.setattr(Spend, name, method)
        return self

    def patch(self) -> Callable[[], None]:
        """Installed until the returned function is called (outside pytest's fixtures)."""
        before = {name: getattr(Spend, name) for name in ("standing", "raise_limit")}
        for name, method in self.methods().items():
            setattr(Spend, name, method)

        def undo() -> None:
            for name, method in before.items():
                setattr(Spend, name, method)

        return undo

    def clear(self) -> None:
        self.raised.clear()
        self.keys.clear()
        self.applied.clear()
        self.calls = 0

    def methods(self) -> dict[str, Any]:
        ledger = self

        async def standing(spend: Spend, name: str, window_key: str | None = None) -> Standing:
            return ledger.standing(spend, name, window_key or WINDOW)  # type: ignore[return-value]

        async def raise_limit(
            spend: Spend,
            name: str,
            window_key: str,
            usd: Decimal | None,
            tokens: int | None,
            key: str = "",
        ) -> Standing:
            ledger.calls += 1
            if key not in ledger.keys:
                ledger.keys.add(key)
                ledger.applied.append((name, window_key, usd, tokens, key))
                nano, count = ledger.raised.get((name, window_key), (0, 0))
                more = nano_of(usd) if usd is not None else 0
                ledger.raised[(name, window_key)] = (nano + more, count + (tokens or 0))
            found = ledger.standing(spend, name, window_key)
            assert found is not None
            return found

        return {"standing": standing, "raise_limit": raise_limit}

    def standing(self, spend: Spend, name: str, window_key: str) -> Standing | None:
        budgets, timezone = spend.budgets()
        budget = next((b for b in budgets if b.name == name), None)
        if budget is None:
            return None
        nano, count = self.raised.get((name, window_key), (0, 0))
        base = nano_of(budget.usd) if budget.usd is not None else None
        limit = None if base is None else base + nano
        tokens = None if budget.tokens is None else budget.tokens + count
        return Standing(
            name=name,
            scope_kind=budget.scope.kind,
            scope_value=budget.scope.value,
            window=budget.window,
            window_key=window_key,
            used_nano=base or 0,
            reserved_nano=0,
            limit_nano=limit,
            used_tokens=budget.tokens or 0,
            reserved_tokens=0,
            limit_tokens=tokens,
            resets_at=datetime(2026, 11, 28, tzinfo=UTC) - timedelta(0),
            timezone=budget.timezone or timezone,
            owners=tuple(budget.owners),
            fallback_model=budget.fallback_model,
            soft=budget.soft,
        )
