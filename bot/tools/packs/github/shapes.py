"""GitHub's JSON trimmed to what the model and the card need, and the pack's argument models."""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Repo = Field(description="owner/name, e.g. acme/api")
Number = Field(ge=1, description="the issue or pull request number")


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


def marker(key: str) -> str:
    """What a create leaves in its body so a retry finds it (GitHub has no idempotency keys);
    an HTML comment, so it does not show on GitHub."""
    return f"<!-- countersign:{key} -->"


def digest(text: str | None) -> str:
    return "sha256:" + hashlib.sha256((text or "").encode()).hexdigest()[:32]


def names(items: list[Any] | None, key: str) -> list[str]:
    return [str(i.get(key)) if isinstance(i, dict) else str(i) for i in items or []]


def clip(text: str | None, limit: int) -> str:
    text = text or ""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def issue_json(issue: dict[str, Any], body_chars: int = 2000) -> dict[str, Any]:
    milestone = issue.get("milestone") or {}
    return {
        "number": issue.get("number"),
        "kind": "pull_request" if issue.get("pull_request") else "issue",
        "title": issue.get("title"),
        "state": issue.get("state"),
        "author": (issue.get("user") or {}).get("login"),
        "labels": names(issue.get("labels"), "name"),
        "assignees": names(issue.get("assignees"), "login"),
        "milestone": milestone.get("title"),
        "comments": issue.get("comments"),
        "updated_at": issue.get("updated_at"),
        "url": issue.get("html_url"),
        "body": clip(issue.get("body"), body_chars),
    }


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


State = Literal["open", "closed"]
MergeMethod = Literal["merge", "squash", "rebase"]
