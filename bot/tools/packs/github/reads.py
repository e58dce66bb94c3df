"""GitHub reads: they run at once, within `GITHUB_REPOS`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import Field

from bot.tools.packs.github.client import GitHubClient, errors
from bot.tools.packs.github.shapes import (
    Args,
    Number,
    Repo,
    clip,
    issue_json,
    provenance,
    without_markers,
)
from bot.tools.registry import Outcome, Tool, ToolContext, ToolError, read_tool

# How far before the proposal an earlier write is looked for (the clocks of the bot and of
# GitHub may differ); `since` keeps the look-up to what changed after that.
CLOCK_SKEW = timedelta(minutes=15)
MAX_PAGES = 100  # 10,000 items: beyond, the look-up says it could not tell (never writes twice)


class SearchIssues(Args):
    query: str = Field(description="words or GitHub search qualifiers, e.g. 'login is:open'")
    repo: str | None = Field(None, description="owner/name to search in; null: every allowed")
    kind: Literal["issue", "pull_request", "any"] = "any"
    limit: int = Field(10, ge=1, le=30)


class GetIssue(Args):
    repo: str = Repo
    number: int = Number


class RepoOnly(Args):
    repo: str = Repo


class GetChecks(Args):
    repo: str = Repo
    number: int = Field(ge=1, description="the pull request number")


async def pull_request(gh: GitHubClient, owner: str, name: str, number: int) -> dict[str, Any]:
    async with errors(f"reading pull request {owner}/{name}#{number}"):
        response = await gh.rest.pulls.async_get(owner, name, number)
    data: dict[str, Any] = response.json()
    return data


async def issue(gh: GitHubClient, owner: str, name: str, number: int) -> dict[str, Any]:
    async with errors(f"reading {owner}/{name}#{number}"):
        response = await gh.rest.issues.async_get(owner, name, number)
    data: dict[str, Any] = response.json()
    return data


async def last_comments(
    gh: GitHubClient, owner: str, name: str, number: int, total: int, per_page: int = 100
) -> list[dict[str, Any]]:
    """The newest comments (GitHub lists oldest first, so read the last page)."""
    page = max(1, -(-total // per_page))
    async with errors(f"reading the comments of {owner}/{name}#{number}"):
        response = await gh.rest.issues.async_list_comments(
            owner, name, number, per_page=per_page, page=page
        )
    found: list[dict[str, Any]] = response.json()
    return found


def since(approved_at: datetime | None) -> datetime | None:
    """Where a look-up for an earlier write of a proposal starts (GitHub's `since`): no write
    happened before its approval."""
    if approved_at is None:
        return None
    at = approved_at if approved_at.tzinfo else approved_at.replace(tzinfo=UTC)
    return at.astimezone(UTC) - CLOCK_SKEW


async def find_in_pages(
    request: Callable[[int], Awaitable[Any]],
    doing: str,
    match: Callable[[dict[str, Any]], bool],
) -> dict[str, Any] | None:
    """The first item any page holds that `match`es, following GitHub's `Link: rel="next"`
    page after page, however many there are (up to `MAX_PAGES`); None if none does."""
    for page in range(1, MAX_PAGES + 1):
        async with errors(doing):
            response = await request(page)
        for item in response.json():
            if isinstance(item, dict) and match(item):
                return item
        if 'rel="next"' not in (response.headers.get("link") or ""):
            return None
    raise ToolError(
        f"could not finish {doing} (more than {MAX_PAGES} pages), so it is unknown whether "
        "the earlier attempt was made; nothing was written."
    )


async def labels_of(gh: GitHubClient, owner: str, name: str) -> list[str]:
    async with errors(f"listing the labels of {owner}/{name}"):
        response = await gh.rest.issues.async_list_labels_for_repo(owner, name, per_page=100)
    return [str(label["name"]) for label in response.json()]


def read_tools(gh: GitHubClient) -> list[Tool[Any]]:
    @read_tool(
        "github_search_issues",
        "Search GitHub issues and pull requests (GitHub search syntax).",
        SearchIssues,
        label="Searching GitHub",
    )
    async def search(args: SearchIssues, ctx: ToolContext) -> Outcome:
        terms = [args.query]
        if args.repo:
            gh.split(args.repo)
            terms.append(f"repo:{args.repo}")
        else:
            for pattern in gh.repos[:5]:
                owner, _, repo = pattern.partition("/")
                terms.append(f"user:{owner}" if repo == "*" else f"repo:{pattern}")
        if args.kind != "any":
            terms.append("is:issue" if args.kind == "issue" else "is:pr")
        async with errors("searching GitHub"):
            response = await gh.rest.search.async_issues_and_pull_requests(
                q=" ".join(terms), per_page=args.limit
            )
        found = response.json()
        items = [
            issue_json(i, 300) | {"repo": "/".join(str(i["repository_url"]).split("/")[-2:])}
            for i in found.get("items", [])
            if gh.allowed("/".join(str(i.get("repository_url", "")).split("/")[-2:]))
        ]
        return Outcome({"total": found.get("total_count"), "items": items}, f"{len(items)} found")

    @read_tool(
        "github_get_issue",
        "Get a GitHub issue or pull request with its recent comments.",
        GetIssue,
        label="Reading GitHub",
    )
    async def get(args: GetIssue, ctx: ToolContext) -> Outcome:
        owner, name = gh.split(args.repo)
        raw = await issue(gh, owner, name, args.number)
        data = issue_json(raw)
        comments = await last_comments(gh, owner, name, args.number, data["comments"] or 0)
        data["recent_comments"] = [
            {
                "author": (c.get("user") or {}).get("login"),
                "body": clip(without_markers(c.get("body")), 800),
            }
            for c in comments[-10:]
        ]
        if data["kind"] == "pull_request":
            pr = await pull_request(gh, owner, name, args.number)
            data |= {
                "head_sha": (pr.get("head") or {}).get("sha"),
                "merged": pr.get("merged"),
                "mergeable": pr.get("mergeable"),
                "draft": pr.get("draft"),
                "requested_reviewers": [r.get("login") for r in pr.get("requested_reviewers", [])],
            }
        return Outcome(
            data,
            f"{args.repo}#{args.number}",
            data.get("url"),
            source=provenance(args.repo, raw, comments[-10:]),
        )

    @read_tool(
        "github_list_labels", "List a GitHub repository's labels.", RepoOnly, label="Reading labels"
    )
    async def labels(args: RepoOnly, ctx: ToolContext) -> Outcome:
        owner, name = gh.split(args.repo)
        found = await labels_of(gh, owner, name)
        return Outcome({"labels": found}, f"{len(found)} labels")

    @read_tool(
        "github_list_assignees",
        "List the people who can be assigned in a GitHub repository.",
        RepoOnly,
        label="Reading assignees",
    )
    async def assignees(args: RepoOnly, ctx: ToolContext) -> Outcome:
        owner, name = gh.split(args.repo)
        async with errors(f"listing the assignees of {args.repo}"):
            response = await gh.rest.issues.async_list_assignees(owner, name, per_page=100)
        logins = [str(u["login"]) for u in response.json()]
        return Outcome({"assignees": logins}, f"{len(logins)} people")

    @read_tool(
        "github_get_checks",
        "Get the checks (CI) of a GitHub pull request's head commit.",
        GetChecks,
        label="Reading checks",
    )
    async def checks(args: GetChecks, ctx: ToolContext) -> Outcome:
        owner, name = gh.split(args.repo)
        sha = str((await pull_request(gh, owner, name, args.number))["head"]["sha"])
        async with errors(f"reading the checks of {args.repo}#{args.number}"):
            response = await gh.rest.checks.async_list_for_ref(owner, name, sha, per_page=100)
        runs = [
            {"name": r.get("name"), "status": r.get("status"), "conclusion": r.get("conclusion")}
            for r in response.json().get("check_runs", [])
        ]
        return Outcome({"head_sha": sha, "checks": runs}, f"{len(runs)} checks")

    return [search, get, labels, assignees, checks]
