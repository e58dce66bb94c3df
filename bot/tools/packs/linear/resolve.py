"""Names the model gives (a team, a workflow state, a person, labels, a project) turned into
Linear's ids with reads. No match or several matches is an invalid argument that names the
choices, so the model can ask or pick; the approver is shown names, never ids."""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Sequence
from typing import Any

from bot.tools.packs.linear.client import LinearClient, LinearError
from bot.tools.registry import ToolArgumentsError

PRIORITIES = {"none": 0, "urgent": 1, "high": 2, "medium": 3, "low": 4}
PRIORITY_NAMES = {v: k for k, v in PRIORITIES.items()}


def client_id(key: str, kind: str) -> str:
    """The id Linear is asked to give what a proposal creates: the same key, the same id, so a
    retry can find it (a UUID in v4 format, derived from the proposal's idempotency key)."""
    digest = hashlib.sha256(f"{kind}:{key}".encode()).hexdigest()[:32]
    return str(uuid.UUID(hex=digest, version=4))


def pick(
    kind: str, wanted: str, options: Sequence[dict[str, Any]], keys: Sequence[str]
) -> dict[str, Any]:
    """The one option whose `keys` equal `wanted` (any case); else the word-prefix matches."""
    target = wanted.strip().lower()
    exact = [o for o in options if any(str(o.get(k) or "").lower() == target for k in keys)]
    found = exact or [
        o
        for o in options
        if any(w.startswith(target) for w in str(o.get(keys[0]) or "").lower().split())
    ]
    if len(found) == 1:
        return found[0]

    def label(o: dict[str, Any]) -> str:
        extra = [str(o[k]) for k in keys[1:] if o.get(k) and str(o[k]) != str(o.get(keys[0]))]
        return f"{o.get(keys[0])}" + (f" ({', '.join(extra)})" if extra else "")

    if found:
        choices = "; ".join(label(o) for o in found[:10])
        raise ToolArgumentsError(f"{kind}: {wanted!r} is ambiguous, it matches: {choices}")
    choices = "; ".join(label(o) for o in options[:25]) or "none"
    raise ToolArgumentsError(f"{kind}: {wanted!r} not found (choices: {choices})")


async def team(lc: LinearClient, wanted: str) -> dict[str, Any]:
    teams = (await lc.run("Teams", "listing teams"))["teams"]["nodes"]
    return pick("team", wanted, teams, ("name", "key"))


async def state(lc: LinearClient, team_: dict[str, Any], wanted: str) -> dict[str, Any]:
    data = await lc.run("WorkflowStates", "listing workflow states", teamId=team_["id"])
    return pick(f"state (team {team_['key']})", wanted, data["workflowStates"]["nodes"], ("name",))


async def person(lc: LinearClient, wanted: str) -> dict[str, Any]:
    users = [
        u
        for u in (await lc.run("Members", "listing members"))["users"]["nodes"]
        if u.get("active", True)
    ]
    return pick("assignee", wanted.lstrip("@"), users, ("name", "displayName", "email"))


async def labels(
    lc: LinearClient, team_: dict[str, Any], wanted: Sequence[str]
) -> list[dict[str, Any]]:
    every = (await lc.run("Labels", "listing labels"))["issueLabels"]["nodes"]
    usable = [lb for lb in every if not lb.get("team") or lb["team"].get("id") == team_["id"]]
    return [pick("labels", w, usable, ("name",)) for w in wanted]


async def project(lc: LinearClient, wanted: str) -> dict[str, Any]:
    projects = (await lc.run("Projects", "listing projects"))["projects"]["nodes"]
    return pick("project", wanted, projects, ("name",))


_IDENTIFIER_IN_URL = re.compile(r"/issue/([A-Za-z0-9]+-\d+)")


async def find_issue(lc: LinearClient, ref: str) -> dict[str, Any] | None:
    """An issue by identifier (ENG-12), id or link; None if Linear says it does not exist."""
    linked = _IDENTIFIER_IN_URL.search(ref)
    ref = linked.group(1).upper() if linked else ref.strip()
    try:
        found: dict[str, Any] | None = (await lc.run("GetIssue", f"reading {ref}", id=ref)).get(
            "issue"
        )
    except LinearError as exc:
        if "not found" in str(exc).lower() or "could not find" in str(exc).lower():
            return None
        raise
    return found


async def issue(lc: LinearClient, ref: str) -> dict[str, Any]:
    found = await find_issue(lc, ref)
    if found is None:
        raise ToolArgumentsError(f"issue: {ref!r} not found in Linear")
    return found
