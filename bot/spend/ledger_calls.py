"""What the ledger's batched writes (`bot.spend.ledger_batch`) take and give back: a call to
hold, its answer, a hold to charge, and what the charge did."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from bot.spend.budget_model import Budget
from bot.spend.standing import Asker, SoftCrossing, Standing, Tokens
from bot.spend.windows import WindowAt


@dataclass(frozen=True)
class Hold:
    """A call to reserve: its estimate against `budgets` (those that apply, in name order),
    each in its window `windows[i]`."""

    asker: Asker
    model: str
    budgets: tuple[Budget, ...]
    windows: tuple[WindowAt, ...]
    nano: int
    tokens: int
    now: datetime
    # The model the bot is configured with (`LLM_MODEL`): never a budget's way around its
    # limit, even where a budget names it as its fallback (that budget would limit nothing).
    main_model: str | None = None

    def spared_by(self, budget: Budget) -> bool:
        """Whether `budget` lets this call through at its limit: a call on the cheaper model
        it names, which is not the configured model."""
        return budget.fallback_model == self.model and self.model != self.main_model

    @property
    def keys(self) -> list[tuple[str, str]]:
        """Its window rows: (budget name, window key), in name order."""
        return [(b.name, at.key) for b, at in zip(self.budgets, self.windows, strict=True)]


@dataclass(frozen=True)
class Held:
    """The reservation's id, or the standing of the first budget without room (no hold)."""

    id: int | None
    refused: Standing | None


@dataclass(frozen=True)
class Charge:
    """A held reservation to move to `state`, charged `used` at `nano` (settled), or its
    whole estimate (`used` None: released, a call that never settled)."""

    reservation_id: int
    state: str
    used: Tokens | None
    nano: int
    charged_from: str
    budgets: tuple[Budget, ...]  # those in force, for their soft thresholds
    timezone: str
    now: datetime


@dataclass(frozen=True)
class Charged:
    """What a charge did: the scope kind of each window it was charged in (none: it was not
    held any more, nothing charged), the tokens and nano charged, the soft notices it won."""

    scopes: tuple[str, ...]
    nano: int
    tokens: int
    crossings: tuple[SoftCrossing, ...]


NOT_HELD = Charged((), 0, 0, ())
