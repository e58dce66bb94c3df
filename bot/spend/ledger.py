"""The spend ledger: reserve before each model call, settle to what the server reported.

CONTRACT (the conversation, the Slack surface, bench/budgets.py and the tests rely on it; the
implementation is being built): every method is safe across replicas sharing one database.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import Decimal

from bot.db.session import Database
from bot.spend.budget_model import Budget
from bot.spend.prices import Prices
from bot.spend.standing import Asker, Refused, Reservation, SoftCrossing, Standing, Tokens


class Spend:
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

    @property
    def any(self) -> bool:
        """Whether any budget is configured (no budget: `reserve` costs nothing)."""
        return bool(self.budgets()[0])

    async def reserve(
        self, asker: Asker, model: str, prompt_tokens: int, max_tokens: int
    ) -> Reservation | Refused:
        """Hold `prompt_tokens + max_tokens` (and their price on `model`) against every budget
        that applies to `asker`, atomically: all or none, and never past a hard limit however
        many calls reserve at once on however many replicas."""
        raise NotImplementedError

    async def settle(
        self, reservation: Reservation, reported: Tokens | None, counted: Tokens
    ) -> list[SoftCrossing]:
        """Replace the hold by what was used: the server's reported usage, else `counted`
        (this side's count of the prompt and of what streamed). Idempotent. Returns the soft
        thresholds crossed for the first time in their window."""
        raise NotImplementedError

    async def standings(self, asker: Asker) -> list[Standing]:
        """Every budget that applies to `asker`, in its current window."""
        raise NotImplementedError

    async def owned(self, user_id: str, groups: frozenset[str]) -> list[Standing]:
        """The budgets `user_id` owns (named, or through one of `groups`)."""
        raise NotImplementedError

    async def standing(self, name: str, window_key: str | None = None) -> Standing | None:
        """One budget in one window (default: the current one); None if no such budget."""
        raise NotImplementedError

    async def raise_limit(
        self, name: str, window_key: str, usd: Decimal | None, tokens: int | None
    ) -> Standing:
        """Add to the budget's limits for that window only (an approved raise)."""
        raise NotImplementedError

    async def release_stale(self, older_than: timedelta) -> int:
        """Release holds left by calls that never settled (a crashed process)."""
        raise NotImplementedError
