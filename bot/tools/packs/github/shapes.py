"""GitHub's JSON trimmed to what the model and the card need, and the pack's argument models."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from bot.provenance import Source
from bot.tools.diffs import digest, key_of, listed, set_change

Repo = Field(description="owner/name, e.g. acme/api")

# GitHub's own limits: an issue title holds 256 characters, a body or comment 65,536; a body
# we write also carries the hidden marker (`marker`), so it leaves room for it.
TITLE_LIMIT = 256
MARKER_ROOM = 64
BODY_LIMIT = 65_536 - MARKER_ROOM
Number = Field(ge=1, description="the issue or pull request number")


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


MARKER = re.compile(r"<!-- countersign:[^>]{0,80}-->")


def without_markers(text: str | None) -> str:
    """Text as shown to the model or sent by it: no proposal markers in either direction, so
    the model can neither see another proposal's marker nor forge one."""
    return MARKER.sub("", text or "").rstrip()


def marker(key: str) -> str:
    """What a create leaves in its body so a retry finds it (GitHub has no idempotency keys);
    an HTML comment, so it does not show on GitHub."""
    return f"<!-- countersign:{key} -->"


def names(items: list[Any] | None, key: str) -> list[str]:
    return [str(i.get(key)) if isinstance(i, dict) else str(i) for i in items or []]


def issue_ref(repo: str, number: int) -> str:
    return f"{repo}#{number}"


def clip(text: str | None, limit: int) -> str:
    text = text or ""
    return text if len(text) <= limit else text[: limit - 1] + "…"


# GitHub's `author_association` of people who belong to the repository; anyone else (NONE,
# CONTRIBUTOR, FIRST_TIME_CONTRIBUTOR, …) wrote from outside it.
INSIDERS = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})


def author_of(item: dict[str, Any]) -> str:
    """Who wrote an issue or comment, saying so when they are from outside the repository:
    their text may try to steer the assistant."""
    login = (item.get("user") or {}).get("login") or "someone"
    inside = str(item.get("author_association") or "NONE") in INSIDERS
    return f"@{login}" if inside else f"@{login} (an outside contributor)"


def provenance(repo: str, issue: dict[str, Any], comments: list[dict[str, Any]]) -> Source:
    """What a read of an issue took in, for the prompt's data marker, the policy and the cards
    of writes proposed after it: the issue (its author's login, its page) and who commented."""
    kind = "pull request" if issue.get("pull_request") else "issue"
    line = f"GitHub {kind} {repo}#{issue.get('number')} by {author_of(issue)}"
    others = sorted({author_of(c) for c in comments} - {author_of(issue)})
    link = issue.get("html_url")
    return Source(
        "tool",
        line + (f", comments by {', '.join(others)}" if others else ""),
        author=str((issue.get("user") or {}).get("login") or "") or None,
        link=link if isinstance(link, str) and link.startswith("https://") else None,
    )


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
        "body": clip(without_markers(issue.get("body")), body_chars),
    }


State = Literal["open", "closed"]
MergeMethod = Literal["merge", "squash", "rebase"]

__all__ = ["digest", "key_of", "listed", "set_change"]
