"""GitHub writes: each one a card built from GitHub's data as it is now.

An update shows every field it touches with its current value; labels and assignees say what is
added and removed. The executor previews again just before running and refuses if any shown
value moved (compared by identity: label and account ids, a body's hash, a milestone's
number). Labels, assignees and a milestone are resolved to ids when the card is made and pinned
with it: the run sends those (see `checks`), never the names again. A merge pins the head commit
and the base branch the approver saw (see `pulls`). Creates and comments carry the proposal's key
in a hidden marker, and a retry looks for it, through every page since the proposal, before
writing again. Titles and bodies are capped at GitHub's own limits (256 and 65,536 characters,
less room for the marker), so an impossible write is an invalid argument, never a card.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from bot.tools.packs.github import checks
from bot.tools.packs.github.client import GitHubClient, errors
from bot.tools.packs.github.reads import find_in_pages, issue, since
from bot.tools.packs.github.shapes import (
    BODY_LIMIT,
    TITLE_LIMIT,
    Args,
    Number,
    Repo,
    State,
    clip,
    digest,
    issue_ref,
    key_of,
    listed,
    marker,
    names,
    set_change,
    without_markers,
)
from bot.tools.registry import Change, Outcome, Preview, Tool, ToolContext, write_tool


class CreateIssue(Args):
    repo: str = Repo
    title: str = Field(min_length=1, max_length=TITLE_LIMIT)
    body: str = Field("", max_length=BODY_LIMIT)
    labels: list[str] | None = None
    assignees: list[str] | None = Field(None, description="GitHub logins")
    milestone: str | None = Field(None, description="milestone title or number")


class UpdateIssue(Args):
    """Fields left null stay as they are."""

    repo: str = Repo
    number: int = Number
    title: str | None = Field(None, min_length=1, max_length=TITLE_LIMIT)
    body: str | None = Field(None, max_length=BODY_LIMIT)
    state: State | None = None
    labels: list[str] | None = Field(None, description="the full new set of labels")
    assignees: list[str] | None = Field(None, description="the full new set of logins")
    milestone: str | None = Field(None, description="title or number; empty string clears it")


class Comment(Args):
    repo: str = Repo
    number: int = Number
    body: str = Field(min_length=1, max_length=BODY_LIMIT)


async def _labels(gh: GitHubClient, ctx: ToolContext, repo: str, wanted: list[str]) -> Any:
    owner, name = gh.split(repo)
    return await ctx.resolve("labels", lambda: checks.known_labels(gh, owner, name, wanted))


async def _people(gh: GitHubClient, ctx: ToolContext, repo: str, logins: list[str]) -> Any:
    owner, name = gh.split(repo)
    return await ctx.resolve("assignees", lambda: checks.assignable(gh, owner, name, logins))


async def _milestone(gh: GitHubClient, ctx: ToolContext, repo: str, wanted: str) -> Any:
    owner, name = gh.split(repo)
    return await ctx.resolve("milestone", lambda: checks.milestone(gh, owner, name, wanted))


def _ids(items: list[Any] | None, key: str) -> list[str]:
    """The identities of an issue's labels or assignees (ids; names where GitHub gave none)."""
    return [str(i.get("id") or i.get(key)) if isinstance(i, dict) else str(i) for i in items or []]


def write_tools(gh: GitHubClient) -> list[Tool[Any]]:
    async def preview_create(args: CreateIssue, ctx: ToolContext) -> Preview:
        gh.split(args.repo)  # inside GITHUB_REPOS, a valid name: else no card
        labels = await _labels(gh, ctx, args.repo, args.labels) if args.labels else []
        people = await _people(gh, ctx, args.repo, args.assignees) if args.assignees else []
        stone = await _milestone(gh, ctx, args.repo, args.milestone) if args.milestone else {}
        return Preview(
            f"Create an issue in {args.repo}: {clip(args.title, 150)}",
            (
                Change("repository", None, args.repo),
                Change("title", None, args.title),
                Change("body", None, clip(args.body, 1500) or None),
                Change("labels", None, listed(names(labels, "name"))),
                Change("assignees", None, listed(names(people, "login"), "@")),
                Change("milestone", None, stone.get("title")),
            ),
        )

    @write_tool(
        "github_create_issue",
        "Create a GitHub issue (a person must approve it first).",
        CreateIssue,
        preview=preview_create,
        finds_earlier_write=True,
    )
    async def create(args: CreateIssue, ctx: ToolContext) -> Outcome:
        owner, name = gh.split(args.repo)
        tag = marker(ctx.idempotency_key) if ctx.idempotency_key else ""
        if tag:  # a retry: the issue may exist already (GitHub has no idempotency keys)
            login = await gh.login()
            after = since(ctx.since)

            async def page(n: int) -> Any:
                return await gh.rest.issues.async_list_for_repo(
                    owner,
                    name,
                    creator=login,
                    state="all",
                    sort="created",
                    direction="desc",
                    per_page=100,
                    page=n,
                    **({"since": after} if after else {}),
                )

            found = await find_in_pages(
                page,
                f"looking for an earlier attempt in {args.repo}",
                lambda i: tag in str(i.get("body") or ""),
            )
            if found is not None:
                ref = issue_ref(args.repo, found["number"])
                return Outcome({"number": found["number"]}, f"Created {ref}", found["html_url"])
        # What the card showed, by id; labels as the repository spells them now.
        labels = await _labels(gh, ctx, args.repo, args.labels) if args.labels else []
        people = await _people(gh, ctx, args.repo, args.assignees) if args.assignees else []
        stone = await _milestone(gh, ctx, args.repo, args.milestone) if args.milestone else {}
        async with errors(f"creating an issue in {args.repo}"):
            response = await gh.rest.issues.async_create(
                owner,
                name,
                title=args.title,
                body=f"{without_markers(args.body)}\n\n{tag}".strip(),
                labels=await checks.label_names(gh, owner, name, labels),
                assignees=names(people, "login"),
                milestone=stone.get("number"),
            )
        made = response.json()
        ref = issue_ref(args.repo, made["number"])
        return Outcome(
            {"number": made["number"], "url": made["html_url"]}, f"Created {ref}", made["html_url"]
        )

    async def preview_update(args: UpdateIssue, ctx: ToolContext) -> Preview:
        owner, name = gh.split(args.repo)
        now = await issue(gh, owner, name, args.number)
        changes: list[Change] = []
        if args.title is not None:
            changes.append(Change("title", now.get("title"), args.title))
        if args.body is not None:
            old_body = now.get("body") or ""
            changes.append(
                Change(
                    "body",
                    clip(without_markers(old_body), 700) or None,
                    clip(args.body, 700),
                    digest(old_body),
                )
            )
        if args.state is not None:
            changes.append(Change("state", now.get("state"), args.state))
        if args.labels is not None:
            old = names(now.get("labels"), "name")
            new = names(await _labels(gh, ctx, args.repo, args.labels), "name")
            shown_old, shown_new = set_change(old, new)
            old_ids = key_of(_ids(now.get("labels"), "name"))
            changes.append(Change("labels", shown_old, shown_new, old_ids))
        if args.assignees is not None:
            old = names(now.get("assignees"), "login")
            new = names(await _people(gh, ctx, args.repo, args.assignees), "login")
            shown_old, shown_new = set_change(old, new, "@")
            old_ids = key_of(_ids(now.get("assignees"), "login"))
            changes.append(Change("assignees", shown_old, shown_new, old_ids))
        if args.milestone is not None:
            current = now.get("milestone") or {}
            stone = await _milestone(gh, ctx, args.repo, args.milestone) if args.milestone else {}
            changes.append(
                Change(
                    "milestone",
                    current.get("title"),
                    stone.get("title"),
                    str(current.get("number") or ""),
                )
            )
        kind = "pull request" if now.get("pull_request") else "issue"
        what = ", ".join(c.field for c in changes) or "nothing"
        return Preview(
            f"Update {kind} {issue_ref(args.repo, args.number)} "
            f"'{clip(now.get('title'), 100)}': {what}",
            tuple(changes),
        )

    @write_tool(
        "github_update_issue",
        "Change a GitHub issue or pull request: title, body, state, labels, assignees, "
        "milestone (a person must approve it first). Leave fields null to keep them.",
        UpdateIssue,
        preview=preview_update,
    )
    async def update(args: UpdateIssue, ctx: ToolContext) -> Outcome:
        owner, name = gh.split(args.repo)
        fields: dict[str, Any] = {
            k: v
            for k, v in args.model_dump(include={"title", "body", "state"}).items()
            if v is not None
        }
        # What the card showed, by id (pinned): labels as the repository spells them now.
        if args.labels is not None:
            pinned = await _labels(gh, ctx, args.repo, args.labels)
            fields["labels"] = await checks.label_names(gh, owner, name, pinned)
        if args.assignees is not None:
            fields["assignees"] = names(await _people(gh, ctx, args.repo, args.assignees), "login")
        if args.milestone is not None:
            fields["milestone"] = (
                (await _milestone(gh, ctx, args.repo, args.milestone))["number"]
                if args.milestone
                else None
            )
        async with errors(f"updating {issue_ref(args.repo, args.number)}"):
            response = await gh.rest.issues.async_update(owner, name, args.number, data=fields)
        url = response.json().get("html_url")
        return Outcome(
            {"updated": sorted(fields)}, f"Updated {issue_ref(args.repo, args.number)}", url
        )

    async def preview_comment(args: Comment, ctx: ToolContext) -> Preview:
        owner, name = gh.split(args.repo)
        now = await issue(gh, owner, name, args.number)
        return Preview(
            f"Comment on {issue_ref(args.repo, args.number)} '{clip(now.get('title'), 100)}'",
            (Change("comment", None, clip(args.body, 1500)),),
        )

    @write_tool(
        "github_comment",
        "Comment on a GitHub issue or pull request (a person must approve it first).",
        Comment,
        preview=preview_comment,
        finds_earlier_write=True,
    )
    async def comment(args: Comment, ctx: ToolContext) -> Outcome:
        owner, name = gh.split(args.repo)
        tag = marker(ctx.idempotency_key) if ctx.idempotency_key else ""
        if tag:  # a retry: the comment may exist, however many came after it
            after = since(ctx.since)

            async def page(n: int) -> Any:
                return await gh.rest.issues.async_list_comments(
                    owner,
                    name,
                    args.number,
                    per_page=100,
                    page=n,
                    **({"since": after} if after else {}),
                )

            found = await find_in_pages(
                page,
                f"looking for an earlier comment on {issue_ref(args.repo, args.number)}",
                lambda c: tag in str(c.get("body") or ""),
            )
            if found is not None:
                ref = issue_ref(args.repo, args.number)
                return Outcome({"commented": True}, f"Commented on {ref}", found.get("html_url"))
        async with errors(f"commenting on {issue_ref(args.repo, args.number)}"):
            response = await gh.rest.issues.async_create_comment(
                owner, name, args.number, body=f"{without_markers(args.body)}\n\n{tag}".strip()
            )
        url = response.json().get("html_url")
        return Outcome(
            {"commented": True}, f"Commented on {issue_ref(args.repo, args.number)}", url
        )

    return [create, update, comment]
