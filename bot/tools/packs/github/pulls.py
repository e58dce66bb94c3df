"""GitHub pull-request writes: request reviewers, and merge (destructive: it pins the head
commit the approver saw and passes it to GitHub, which refuses the merge if the branch moved,
and pins the base branch with its commit, so a pull request retargeted since the card, from
`staging` to `main` say, is stale and never merged)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from bot.tools.packs.github.client import GitHubClient, errors
from bot.tools.packs.github.reads import pull_request
from bot.tools.packs.github.shapes import (
    Args,
    MergeMethod,
    Repo,
    clip,
    issue_ref,
    key_of,
    names,
    set_change,
)
from bot.tools.registry import Change, Outcome, Preview, Tool, ToolContext, ToolError, write_tool


class RequestReviewers(Args):
    repo: str = Repo
    number: int = Field(ge=1, description="the pull request number")
    reviewers: list[str] = Field(min_length=1, description="GitHub logins")


class Merge(Args):
    repo: str = Repo
    number: int = Field(ge=1, description="the pull request number")
    method: MergeMethod = "merge"


async def _base(repo: str, pr: dict[str, Any]) -> dict[str, Any]:
    """The branch a pull request merges into: its identity is the repository and the branch
    (a push to it is not a retarget); its commit is kept with the card to say what was seen."""
    base = pr.get("base") or {}
    full = str((base.get("repo") or {}).get("full_name") or repo).lower()
    ref = str(base.get("ref") or "")
    return {"id": f"{full}:{ref}", "name": ref, "sha": str(base.get("sha") or "")}


def pull_tools(gh: GitHubClient) -> list[Tool[Any]]:
    async def preview_reviewers(args: RequestReviewers, ctx: ToolContext) -> Preview:
        owner, name = gh.split(args.repo)
        pr = await pull_request(gh, owner, name, args.number)
        old = names(pr.get("requested_reviewers"), "login")
        new = sorted({*old, *(r.lstrip("@") for r in args.reviewers)}, key=str.lower)
        shown_old, shown_new = set_change(old, new, "@")
        return Preview(
            f"Request reviews on {issue_ref(args.repo, args.number)} "
            f"'{clip(pr.get('title'), 100)}'",
            (Change("reviewers", shown_old, shown_new, key_of(old)),),
        )

    @write_tool(
        "github_request_reviewers",
        "Ask people to review a GitHub pull request (a person must approve it first).",
        RequestReviewers,
        preview=preview_reviewers,
    )
    async def reviewers(args: RequestReviewers, ctx: ToolContext) -> Outcome:
        owner, name = gh.split(args.repo)
        logins = [r.lstrip("@") for r in args.reviewers]
        async with errors(f"requesting reviews on {issue_ref(args.repo, args.number)}"):
            await gh.rest.pulls.async_request_reviewers(owner, name, args.number, reviewers=logins)
        return Outcome(
            {"requested": logins}, f"Requested reviews on {issue_ref(args.repo, args.number)}"
        )

    async def preview_merge(args: Merge, ctx: ToolContext) -> Preview:
        owner, name = gh.split(args.repo)
        pr = await pull_request(gh, owner, name, args.number)
        if pr.get("merged"):
            raise ToolError(f"{issue_ref(args.repo, args.number)} is already merged")
        if pr.get("state") != "open":
            raise ToolError(f"{issue_ref(args.repo, args.number)} is closed; it cannot be merged")
        head = str((pr.get("head") or {}).get("sha") or "")
        base = await ctx.resolve("base", lambda: _base(args.repo, pr))
        return Preview(
            f"Merge pull request {issue_ref(args.repo, args.number)} "
            f"'{clip(pr.get('title'), 100)}' "
            f"into {base['name']}",
            (
                Change("merge method", None, args.method),
                Change("base branch", None, f"{base['name']} (at {str(base['sha'])[:12]})"),
                Change("head commit", None, head[:12]),
                Change("state", pr.get("state"), "merged"),
            ),
            pin=head,
            pin_changed=f"the pull request's head moved to {head[:12]}",
        )

    @write_tool(
        "github_merge_pull_request",
        "Merge a GitHub pull request (a person must approve it first; it cannot be undone).",
        Merge,
        preview=preview_merge,
        destructive=True,
    )
    async def merge(args: Merge, ctx: ToolContext) -> Outcome:
        owner, name = gh.split(args.repo)
        # The base was compared just before (a retargeted pull request is stale); GitHub's
        # merge takes no base, so the head is what it is asked to hold.
        # The head the approver saw: GitHub refuses (409) if the branch moved since.
        head = ctx.pin or str((await pull_request(gh, owner, name, args.number))["head"]["sha"])
        async with errors(f"merging {issue_ref(args.repo, args.number)}"):
            response = await gh.rest.pulls.async_merge(
                owner, name, args.number, sha=head, merge_method=args.method
            )
        sha = response.json().get("sha")
        return Outcome({"merged": True, "sha": sha}, f"Merged {issue_ref(args.repo, args.number)}")

    return [reviewers, merge]
