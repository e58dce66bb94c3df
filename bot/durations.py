"""Durations as operators write them, in settings and in the policy file: `30s`, `15m`, `1h`,
`2d`, or a bare number of seconds."""

from __future__ import annotations

import re
from datetime import timedelta

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(value: str | int | float) -> timedelta:
    """The duration `value` names; ValueError for anything else, or for zero."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    else:
        found = _DURATION.match(str(value))
        if found is None:
            raise ValueError(f"{value!r} must be a duration such as 30s, 15m, 1h or 1d")
        seconds = float(found.group(1)) * _UNITS[found.group(2).lower()]
    if seconds <= 0:
        raise ValueError("a duration must be longer than zero")
    return timedelta(seconds=seconds)
