"""A budget's windows, and how people are told about them.

Calendar windows are read in the budget's time zone (else the policy file's, default UTC): a
day ("2026-11-27"), an ISO week starting Monday ("2026-W48"), a month ("2026-11"); each resets
at local midnight. A `turn` window is keyed by the turn. `sentence` is the one way a standing
is said, on the pause card, in /usage and on the App Home alike:
"support-daily, $12.00 of $12.00 today; resets 00:00 UTC".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import ROUND_HALF_UP, Decimal
from zoneinfo import ZoneInfo

from bot.spend.budget_model import Budget
from bot.spend.standing import Standing, usd_of

PERIOD = {"day": "today", "week": "this week", "month": "this month", "turn": "this turn"}


@dataclass(frozen=True)
class WindowAt:
    key: str
    resets_at: datetime | None  # aware; None for a turn window
    timezone: str


def zone_of(budget: Budget, file_timezone: str) -> str:
    return budget.timezone or file_timezone or "UTC"


def _midnight(day: date, zone: ZoneInfo) -> datetime:
    return datetime.combine(day, time(0), tzinfo=zone)


def window_at(budget: Budget, file_timezone: str, now: datetime, turn_key: str) -> WindowAt:
    """The window of `budget` that `now` (aware) falls in."""
    name = zone_of(budget, file_timezone)
    if budget.window == "turn":
        return WindowAt(turn_key, None, name)
    zone = ZoneInfo(name)
    today = now.astimezone(zone).date()
    if budget.window == "day":
        return WindowAt(today.isoformat(), _midnight(today + timedelta(days=1), zone), name)
    if budget.window == "week":
        year, week, weekday = today.isocalendar()
        monday = today + timedelta(days=8 - weekday)
        return WindowAt(f"{year}-W{week:02d}", _midnight(monday, zone), name)
    first = date(today.year + today.month // 12, today.month % 12 + 1, 1)
    return WindowAt(f"{today.year}-{today.month:02d}", _midnight(first, zone), name)


def money(nano: int) -> str:
    """Dollars as people read them: "$12.00"; a sum under a cent keeps four decimals."""
    usd = usd_of(nano)
    if 0 < usd < Decimal("0.01"):
        return f"${usd.quantize(Decimal('0.0001'), rounding=ROUND_HALF_UP)}"
    return f"${usd.quantize(Decimal('0.01'), rounding=ROUND_HALF_UP):,}"


def resets_phrase(standing: Standing) -> str:
    """ "resets 00:00 UTC", "resets Monday 00:00 Europe/Paris", "resets 1 Dec 00:00 UTC";
    "" for a turn window (it ends with the turn)."""
    if standing.resets_at is None:
        return ""
    local = standing.resets_at.astimezone(ZoneInfo(standing.timezone))
    clock = f"{local:%H:%M} {standing.timezone}"
    if standing.window == "week":
        return f"resets {local:%A} {clock}"
    if standing.window == "month":
        return f"resets {local.day} {local:%b} {clock}"
    return f"resets {clock}"


def use_phrase(standing: Standing) -> str:
    """ "$12.00 of $12.00", "180,000 of 200,000 tokens", or both joined by "and". What
    replies being written hold counts as used (it is what stops the next call), and is named:
    "$12.00 of $12.00 ($0.40 held by replies being written)"."""
    parts, held = [], []
    if standing.limit_nano is not None:
        used = standing.used_nano + standing.reserved_nano
        parts.append(f"{money(used)} of {money(standing.limit_nano)}")
        if standing.reserved_nano:
            held.append(money(standing.reserved_nano))
    if standing.limit_tokens is not None:
        used_tokens = standing.used_tokens + standing.reserved_tokens
        parts.append(f"{used_tokens:,} of {standing.limit_tokens:,} tokens")
        if standing.reserved_tokens:
            held.append(f"{standing.reserved_tokens:,} tokens")
    said = " and ".join(parts)
    return f"{said} ({' and '.join(held)} held by replies being written)" if held else said


def sentence(standing: Standing) -> str:
    """ "support-daily, $12.00 of $12.00 today; resets 00:00 UTC"."""
    said = f"{standing.name}, {use_phrase(standing)} {PERIOD[standing.window]}"
    resets = resets_phrase(standing)
    return f"{said}; {resets}" if resets else said


def window_words(window: str, key: str) -> str:
    """A past window as people name it, from its key (`window_at`): "28 Nov 2026", "the week
    of 23 Nov 2026", "November 2026"; a key that does not read so (a turn's): "its window".
    Never the key itself ("2026-W48")."""
    try:
        if window == "day":
            day = date.fromisoformat(key)
            return f"{day.day} {day:%b %Y}"
        if window == "week":
            iso_year, iso_week = key.split("-W")
            monday = date.fromisocalendar(int(iso_year), int(iso_week), 1)
            return f"the week of {monday.day} {monday:%b %Y}"
        if window == "month":
            year, month = (int(part) for part in key.split("-"))
            return f"{date(year, month, 1):%B %Y}"
    except ValueError:
        pass
    return "its window"


def window_named(budget: Budget, file_timezone: str, key: str) -> WindowAt:
    """The window of `budget` that `key` names (as `window_at` wrote it); an unreadable key
    gets no reset time."""
    name = zone_of(budget, file_timezone)
    zone = ZoneInfo(name)
    try:
        if budget.window == "day":
            day = date.fromisoformat(key)
            return WindowAt(key, _midnight(day + timedelta(days=1), zone), name)
        if budget.window == "week":
            iso_year, iso_week = key.split("-W")
            monday = date.fromisocalendar(int(iso_year), int(iso_week), 1)
            return WindowAt(key, _midnight(monday + timedelta(days=7), zone), name)
        if budget.window == "month":
            year, month = (int(part) for part in key.split("-"))
            first = date(year + month // 12, month % 12 + 1, 1)
            return WindowAt(key, _midnight(first, zone), name)
    except ValueError:
        pass
    return WindowAt(key, None, name)
