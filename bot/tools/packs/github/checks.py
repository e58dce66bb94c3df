"""Names the model gives checked against the repository before a card is shown: a label that
does not exist, a person who cannot be assigned or an unknown milestone is an invalid argument
(the model is told what exists), never a card.

Each is returned with its id (labels and people as `{"id", "name"/"login"}`, a milestone by its
number), which the preview pins with the proposal (`ToolContext.resolve`): the run sends what
the card showed, and a label or login that came to mean something else makes the action stale.
"""

from __future__ import annotations

from typing import Any

from githubkit.exception import RequestFailed

from bot.tools.packs.github.client import GitHubClient, errors
from bot.tools.registry import ToolArgumentsError, ToolError


async def label_objects(gh: GitHubClient, owner: str, name: str) -> list[dict[str, Any]]:
    async with errors(f"listing the labels of {owner}/{name}"):
        response = await gh.rest.issues.async_list_labels_for_repo(owner, name, per_page=100)
    return [
        {"id": str(lb.get("id") or lb["name"]), "name": str(lb["name"])} for lb in response.json()
    ]


async def known_labels(
    gh: GitHubClient, owner: str, name: str, wanted: list[str]
) -> list[dict[str, Any]]:
    """`wanted` as the repository's labels (spelled as it spells them, with their ids)."""
    existing = await label_objects(gh, owner, name)
    by_lower = {label["name"].lower(): label for label in existing}
    missing = [w for w in wanted if w.lower() not in by_lower]
    if missing:
        shown = ", ".join(label["name"] for label in existing[:30]) or "none"
        raise ToolArgumentsError(
            f"labels: {', '.join(missing)} not found in {owner}/{name} (its labels: {shown})"
        )
    return [by_lower[w.lower()] for w in wanted]


async def label_names(
    gh: GitHubClient, owner: str, name: str, pinned: list[dict[str, Any]]
) -> list[str]:
    """The labels the card showed, by id, as they are spelled now (GitHub takes names, and
    would make a new label for a name that no longer exists)."""
    if not pinned:
        return []
    now = {label["id"]: label["name"] for label in await label_objects(gh, owner, name)}
    gone = [str(p.get("name")) for p in pinned if str(p.get("id")) not in now]
    if gone:
        raise ToolError(
            f"stale: the label(s) {', '.join(gone)} shown on the card no longer exist in "
            f"{owner}/{name}; nothing was done. Ask the assistant again to propose it afresh."
        )
    return [now[str(p["id"])] for p in pinned]


async def assignable(
    gh: GitHubClient, owner: str, name: str, logins: list[str]
) -> list[dict[str, Any]]:
    """Each login that may be assigned here, with its account's id (`{"id", "login"}`)."""
    people = []
    for login in (login.strip().lstrip("@") for login in logins):
        try:
            await gh.rest.issues.async_check_user_can_be_assigned(owner, name, login)
        except RequestFailed as exc:
            if exc.response.status_code == 404:
                raise ToolArgumentsError(
                    f"assignees: {login!r} cannot be assigned in {owner}/{name} (see "
                    "github_list_assignees)"
                ) from None
            async with errors(f"checking {login} in {owner}/{name}"):
                raise
        async with errors(f"reading the account {login}"):
            user = (await gh.rest.users.async_get_by_username(login)).json()
        people.append({"id": str(user["id"]), "login": str(user["login"])})
    return people


async def milestone(gh: GitHubClient, owner: str, name: str, wanted: str) -> dict[str, Any]:
    """A milestone by title (case-insensitive) or number, as `{"id", "number", "title"}` (its
    number is its identity in the repository)."""
    async with errors(f"listing the milestones of {owner}/{name}"):
        response = await gh.rest.issues.async_list_milestones(
            owner, name, state="all", per_page=100
        )
    found = response.json()
    matches = [
        m
        for m in found
        if str(m.get("number")) == wanted.lstrip("#")
        or str(m.get("title")).lower() == wanted.lower()
    ]
    if len(matches) != 1:
        shown = ", ".join(str(m.get("title")) for m in found[:20]) or "none"
        problem = "matches several" if matches else "not found"
        raise ToolArgumentsError(
            f"milestone: {wanted!r} {problem} in {owner}/{name} (its milestones: {shown})"
        )
    chosen = matches[0]
    return {"id": str(chosen["number"]), "number": chosen["number"], "title": chosen.get("title")}
