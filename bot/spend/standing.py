"""What the ledger answers: whom a model call is for, a reservation, a refusal at a limit and
a budget's standing in its window. Money is kept in nano-dollars (1e-9 USD) as integers, so
sums are exact; `Decimal` only at the edges."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

NANO = Decimal("1e9")


def usd_of(nano: int) -> Decimal:
    return Decimal(nano) / NANO


def nano_of(usd: Decimal) -> int:
    return int((usd * NANO).to_integral_value())


@dataclass(frozen=True)
class Asker:
    """Whom and where a model call is for: every budget whose scope matches applies."""

    team_id: str
    channel_id: str
    user_id: str  # the requester of the turn
    groups: frozenset[str]  # the requester's user groups (S…), read from Slack
    packs: frozenset[str]  # the packs whose tools the turn offers the model
    turn_key: str  # one per turn (a resumed turn keeps its key): per-turn windows


@dataclass(frozen=True)
class Tokens:
    prompt: int  # cached prompt tokens included, as the server reports them
    completion: int
    cached: int = 0  # of `prompt`, those the server read from its cache (cheaper)

    @property
    def total(self) -> int:
        return self.prompt + self.completion


@dataclass(frozen=True)
class Standing:
    """One budget in one window, as people are shown it."""

    name: str
    scope_kind: str  # workspace | channel | user | group | pack | per_turn
    scope_value: str | None  # the id or pack name
    window: str  # day | week | month | turn
    window_key: str  # which window ("2026-11-27", "2026-W48", "2026-11", a turn key)
    used_nano: int
    reserved_nano: int
    limit_nano: int | None  # the policy's usd plus approved raises; None: no money limit
    used_tokens: int
    reserved_tokens: int
    limit_tokens: int | None  # the policy's tokens plus approved raises; None: no token limit
    resets_at: datetime | None  # aware; None for a turn window
    timezone: str
    owners: tuple[str, ...]
    fallback_model: str | None
    soft: float | None

    @property
    def reached(self) -> bool:
        """Its hard limit is used up (what is reserved is not counted)."""
        money = self.limit_nano is not None and self.used_nano >= self.limit_nano
        tokens = self.limit_tokens is not None and self.used_tokens >= self.limit_tokens
        return money or tokens


@dataclass(frozen=True)
class Reservation:
    """Held against every budget that applied: in the database (`id`), or taken from this
    process's leases in memory (`ticket`, written behind: bot/spend/leases.py). Neither:
    no budget applied, nothing to settle."""

    id: int | None
    model: str
    tokens: int
    nano: int
    ticket: object | None = field(default=None, compare=False, repr=False)

    @property
    def counted(self) -> bool:
        """Whether it holds anything, to settle."""
        return self.id is not None or self.ticket is not None


@dataclass(frozen=True)
class Refused:
    """No call: this budget (the first found at its limit) has no room for the estimate."""

    standing: Standing


@dataclass(frozen=True)
class SoftCrossing:
    """A budget passed its soft fraction for the first time in this window: its owners get
    one notice."""

    standing: Standing
