"""The `budgets:` entries of the policy file. The names are a contract: scripts outside this
repository write such files.

```yaml
timezone: Europe/Paris              # optional, for every budget's calendar windows (UTC)
budgets:
  - name: support-daily             # unique
    scope: {channel: C0SUPPORT}     # workspace | channel | user | group | pack | per_turn
    window: day                     # day | week | month (calendar, in `timezone`) | turn
    usd: 12.00                      # a money limit, and/or
    tokens: 200000                  # a token limit (prompt + completion)
    soft: 0.8                       # optional: one notice to the owners per window
    owners: [U0LEAD, S0FINANCE]     # people or user groups who may approve a raise
    fallback_model: gpt-4o-mini     # optional: offered at the limit
```
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Window = Literal["day", "week", "month", "turn"]
ScopeKind = Literal["workspace", "channel", "user", "group", "pack", "per_turn"]

_IDS = {
    "channel": re.compile(r"[CGD][A-Z0-9]{2,}"),
    "user": re.compile(r"[UW][A-Z0-9]{2,}"),
    "group": re.compile(r"S[A-Z0-9]{2,}"),
    "pack": re.compile(r"[A-Za-z0-9_.-]{1,64}"),
}
OWNER = re.compile(r"[UWS][A-Z0-9]{2,}")


def check_timezone(value: str) -> str:
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"{value!r} is not a time zone (write it like UTC or Europe/Paris)"
        ) from None
    return value


class Scope(BaseModel):
    """Exactly one of its keys: whom the budget counts."""

    model_config = ConfigDict(extra="forbid")

    workspace: Literal[True] | None = None
    channel: str | None = None
    user: str | None = None
    group: str | None = None
    pack: str | None = None
    per_turn: Literal[True] | None = None

    @model_validator(mode="after")
    def _one(self) -> Scope:
        given = [k for k, v in self.model_dump().items() if v is not None]
        if len(given) != 1:
            raise ValueError(
                "a scope has exactly one of workspace: true, channel: C…, user: U…, "
                "group: S…, pack: NAME or per_turn: true"
            )
        kind = given[0]
        value = getattr(self, kind)
        if kind in _IDS and not _IDS[kind].fullmatch(str(value)):
            raise ValueError(f"{kind}: {value!r} is not a Slack {kind} id")
        return self

    @property
    def kind(self) -> ScopeKind:
        for name in ("workspace", "channel", "user", "group", "pack", "per_turn"):
            if getattr(self, name) is not None:
                return name
        raise AssertionError("validated: one key is set")

    @property
    def value(self) -> str | None:
        """The id or pack name it names; None for workspace and per_turn."""
        kind = self.kind
        return None if kind in ("workspace", "per_turn") else str(getattr(self, kind))


class Budget(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    scope: Scope
    window: Window
    usd: Decimal | None = Field(None, ge=0, le=1_000_000, decimal_places=6)
    tokens: int | None = Field(None, ge=0, le=10**12)
    soft: float | None = Field(None, gt=0, lt=1)
    owners: list[str] = Field(default_factory=list)
    fallback_model: str | None = Field(None, min_length=1, max_length=200)
    timezone: str | None = None  # overrides the file's `timezone` for this budget

    _tz = field_validator("timezone")(lambda v: None if v is None else check_timezone(v))

    @field_validator("owners")
    @classmethod
    def _owners(cls, v: list[str]) -> list[str]:
        for owner in v:
            if not OWNER.fullmatch(owner):
                raise ValueError(f"{owner!r} is not a Slack user (U…) or user group (S…) id")
        return v

    @model_validator(mode="after")
    def _limited(self) -> Budget:
        if self.usd is None and self.tokens is None:
            raise ValueError("a budget limits usd, tokens or both")
        if self.scope.kind == "per_turn" and self.window != "turn":
            raise ValueError("a per_turn budget's window is turn")
        return self


def unique_names(budgets: list[Budget]) -> list[Budget]:
    seen: set[str] = set()
    for budget in budgets:
        if budget.name in seen:
            raise ValueError(f"two budgets are named {budget.name!r}")
        seen.add(budget.name)
    return budgets
