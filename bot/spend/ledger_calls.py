"""What the ledger's batched writes (`bot.spend.ledger_batch`) take and give back: a call to
hold, its answer, a hold to charge, and what the charge did; and, for leases
(bot/spend/leases.py), a call taken in memory (`Ticket`) and a flush writing such calls
behind (`Flush`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

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
    # Leases (bot/spend/leases.py): whose call it is, the room of its own leases on these
    # windows it gives back first (window id, nano, tokens: counted as free), whether to
    # grant it a lease after (calendar windows only), and whether it reserves nothing at all
    # (`probe`: a lease resized by the flusher, sized by `nano` and `tokens`).
    holder: str = ""
    returned: tuple[tuple[int, int, int], ...] = ()
    lease: bool = False
    probe: bool = False

    def spared_by(self, budget: Budget) -> bool:
        """Whether `budget` lets this call through at its limit: a call on the cheaper model
        it names, which is not the configured model."""
        return budget.fallback_model == self.model and self.model != self.main_model

    @property
    def keys(self) -> list[tuple[str, str]]:
        """Its window rows: (budget name, window key), in name order."""
        return [(b.name, at.key) for b, at in zip(self.budgets, self.windows, strict=True)]


@dataclass(frozen=True)
class Grant:
    """A lease granted (its room added to the holder's) on one window, and the window's
    reclaim generation then."""

    window_id: int
    nano: int
    tokens: int
    reclaim: int


@dataclass(frozen=True)
class Held:
    """The reservation's id, or the standing of the first budget without room (no hold).
    `retry`: refused while other processes' leases hold room, which they were asked to give
    back (decide again shortly). `grants`: leases granted, by (budget, window key)."""

    id: int | None
    refused: Standing | None
    retry: bool = False
    grants: dict[tuple[str, str], Grant] = field(default_factory=dict)


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


@dataclass(eq=False)
class Ticket:
    """A call that took its estimate from this process's leases, in memory: written behind
    (`Flush`) as a reservation, held or already settled."""

    asker: Asker
    model: str
    nano: int
    tokens: int
    holds: list[dict[str, Any]]  # [{"window": id, "budget": name, "scope": kind}]
    took: tuple[tuple[int, int, int], ...]  # (window id, nano, tokens) taken from leases
    created_at: datetime
    id: int | None = None  # its reservation row, once written
    written: bool = False  # its row is written, or being written
    used: Tokens | None = None  # settled: what it used, charged `charged_nano`
    charged_nano: int = 0
    charged_from: str = ""
    settled: bool = False
    owner: Any = field(default=None, repr=False)  # the flusher that writes it


@dataclass(frozen=True)
class Flush:
    """What this process did in memory since its last flush: calls to write (each with
    whether it was settled when the flush began), lease room given back, leases to renew."""

    holder: str
    tickets: tuple[tuple[Ticket, bool], ...]
    returned: tuple[tuple[int, int, int], ...]
    renew: tuple[int, ...]
    budgets: tuple[Budget, ...]
    timezone: str
    now: datetime

    @property
    def window_ids(self) -> set[int]:
        found = {w for t, _ in self.tickets for w, _, _ in t.took}
        return found | {w for w, _, _ in self.returned} | set(self.renew)


@dataclass(frozen=True)
class Flushed:
    """The ids of the calls written (in the flush's order), what each written settled was
    charged (scope kinds, nano, tokens), and the soft notices the flush brought due."""

    ids: tuple[int, ...]
    charged: tuple[tuple[tuple[str, ...], int, int], ...]
    crossings: tuple[SoftCrossing, ...]
