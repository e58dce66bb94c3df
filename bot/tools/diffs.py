"""How a card shows a change to a value or a set, and what is compared before running."""

from __future__ import annotations

import hashlib


def digest(text: str | None) -> str:
    return "sha256:" + hashlib.sha256((text or "").encode()).hexdigest()[:32]


def listed(values: list[str], prefix: str = "") -> str | None:
    return ", ".join(f"{prefix}{v}" for v in values) if values else None


def set_change(old: list[str], new: list[str], prefix: str = "") -> tuple[str | None, str]:
    """`new` as shown on a card, with what is added and removed spelled out."""
    added = [v for v in new if v.lower() not in {o.lower() for o in old}]
    removed = [v for v in old if v.lower() not in {n.lower() for n in new}]
    notes = [f"adds {listed(added, prefix)}" if added else "", ""]
    notes[1] = f"removes {listed(removed, prefix)}" if removed else ""
    shown = listed(new, prefix) or "none"
    said = "; ".join(n for n in notes if n)
    return listed(old, prefix), f"{shown} ({said})" if said else shown


def key_of(values: list[str]) -> str:
    return ",".join(sorted(v.lower() for v in values))
