"""What a resolved name is (its identity) and how a moved one is told.

A preview resolves names through `ToolContext.resolve` into JSON values: an object with an
`id` (and the `name` the card showed), or a list of them. Identity is the ids alone, so a
renamed state is the same state and a new project that took the old name is another project.
"""

from __future__ import annotations

from typing import Any

_NAME_KEYS = ("name", "displayName", "title", "login", "key")


def identity(value: Any) -> Any:
    """The ids in `value`, in its shape (what is compared before a run)."""
    if isinstance(value, dict):
        return str(value.get("id"))
    if isinstance(value, list):
        return [identity(v) for v in value]
    return value


def shown(value: Any) -> str:
    """`value` as a person reads it: names with their ids where those differ."""
    if isinstance(value, list):
        return ", ".join(shown(v) for v in value) or "none"
    if isinstance(value, dict):
        name = next((str(value[k]) for k in _NAME_KEYS if value.get(k)), "")
        ident = str(value.get("id") or "")
        if not name or name == ident:
            return repr(ident or name)
        return f"{name!r} (id {ident})"
    return "nothing" if value is None else repr(value)


def moved(pinned: dict[str, Any], now: dict[str, Any]) -> str | None:
    """The first resolved name whose identity differs from the one pinned with the card, told
    with both versions; None when every one still names the same thing."""
    for key in sorted({*pinned, *now}):
        before, after = pinned.get(key), now.get(key)
        if identity(before) != identity(after):
            if key not in pinned:
                return f"{key} was not recorded when the card was made (it is now {shown(after)})"
            return f"{key} now means {shown(after)}, not {shown(before)} as shown on the card"
    return None
