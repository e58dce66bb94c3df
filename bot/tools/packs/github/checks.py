"""Names the model gives checked against the repository before a card is shown: a label that
does not exist, a person who cannot be assigned or an unknown milestone is an invalid argument
(the model is told what exists), never a card."""

from __future__ import annotations

from typing import Any

from githubkit.exception import RequestFailed

from bot.tools.packs.github.client import GitHubClient, errors
from bot.tools.packs.github.reads import labels_of
from bot.tools.registry import ToolArgumentsError


async def known_labels(gh: GitHubClient, owner: str, name: str, wanted: list[str]) -> list[str]:
    """`wanted` spelled as the repository spells them."""
    existing = await labels_of(gh, owner, name)
    by_lower = {label.lower(): label for label in existing}
    missing = [w for w in wanted if w.lower() not in by_lower]
    if missing:
        shown = ", ".join(existing[:30]) or "none"
        raise ToolArgumentsError(
            f"labels: {', '.join(missing)} not found in {owner}/{name} (its labels: {shown})"
        )
    return [by_lower[w.lower()] for w in wanted]


async def assignable(gh: GitHubClient, owner: str, name: str, logins: list[str]) -> list[str]:
    logins = [login.strip().lstrip("@") for login in logins]
    for login in logins:
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
    return logins


async def milestone(gh: GitHubClient, owner: str, name: str, wanted: str) -> dict[str, Any]:
    """A milestone by title (case-insensitive) or number."""
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
    chosen: dict[str, Any] = matches[0]
    return chosen
