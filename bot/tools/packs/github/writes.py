"""GitHub writes: each one a card built from GitHub's data as it is now.

An update shows every field it touches with its current value; labels and assignees say what is
added and removed. The executor previews again just before running and refuses if any shown
value moved (compared by value: label names, logins, a body's hash, a milestone's number). A
merge pins the head commit the approver saw and passes it to GitHub, which refuses the merge if
the branch moved (see `pulls`). Creates and comments carry the proposal's key in a hidden
marker, and a retry looks for it before writing again.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from bot.tools.packs.github import checks
from bot.tools.packs.github.client import GitHubClient, errors
from bot.tools.packs.github.reads import issue, last_comments
from bot.tools.packs.github.shapes import (
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
    title: str = Field(min_length=1, max_length=256)
    body: str = Field("", max_length=60_000)
    labels: list[str] | None = None
    assignees: list[str] | None = Field(None, description="GitHub logins")
    milestone: str | None = Field(None, description="milestone title or number")


class UpdateIssue(Args):
    """Fields left null stay as they are."""

    repo: str = Repo
    number: int = Number
    title: str | None = Field(None, min_length=1, max_length=256)
    body: str | None = Field(None, max_length=60_000)
    state: State | None = None
    labels: list[str] | None = Field(None, description="the full new set of labels")
    assignees: list[str] | None = Field(None, description="the full new set of logins")
    milestone: str | None = Field(None, description="title or number; empty string clears it")


class Comment(Args):
    repo: str = Repo
    number: int = Number
    body: str = Field(min_length=1, max_length=60_000)


def write_tools(gh: GitHubClient) -> list[Tool[Any]]:
    async def preview_create(args: CreateIssue, ctx: ToolContext) -> Preview:
        owner, name = gh.split(args.repo)
        labels = await checks.known_labels(gh, owner, name, args.labels or [])
        people = await checks.assignable(gh, owner, name, args.assignees or [])
        stone = await checks.milestone(gh, owner, name, args.milestone) if args.milestone else {}
        return Preview(
            f"Create an issue in {args.repo}: {clip(args.title, 150)}",
            (
                Change("repository", None, args.repo),
                Change("title", None, args.title),
                Change("body", None, clip(args.body, 1500) or None),
                Change("labels", None, listed(labels)),
                Change("assignees", None, listed(people, "@")),
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
            async with errors(f"looking for an earlier attempt in {args.repo}"):
                response = await gh.rest.issues.async_list_for_repo(
                    owner,
                    name,
                    creator=await gh.login(),
                    state="all",
                    sort="created",
                    direction="desc",
                    per_page=50,
                )
            for found in response.json():
                if tag in str(found.get("body") or ""):
                    ref = issue_ref(args.repo, found["number"])
                    return Outcome({"number": found["number"]}, f"Created {ref}", found["html_url"])
        stone = await checks.milestone(gh, owner, name, args.milestone) if args.milestone else {}
        # As the repository spells them: GitHub would make a new label for "P1" beside "p1".
        labels = await checks.known_labels(gh, owner, name, args.labels) if args.labels else []
        async with errors(f"creating an issue in {args.repo}"):
            response = await gh.rest.issues.async_create(
                owner,
                name,
                title=args.title,
                body=f"{without_markers(args.body)}\n\n{tag}".strip(),
                labels=labels,
                assignees=[a.lstrip("@") for a in args.assignees or []],
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
            new = await checks.known_labels(gh, owner, name, args.labels)
            shown_old, shown_new = set_change(old, new)
            changes.append(Change("labels", shown_old, shown_new, key_of(old)))
        if args.assignees is not None:
            old = names(now.get("assignees"), "login")
            new = await checks.assignable(gh, owner, name, args.assignees)
            shown_old, shown_new = set_change(old, new, "@")
            changes.append(Change("assignees", shown_old, shown_new, key_of(old)))
        if args.milestone is not None:
            current = now.get("milestone") or {}
            stone = (
                await checks.milestone(gh, owner, name, args.milestone) if args.milestone else {}
            )
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
        if args.labels is not None:  # as the repository spells them
            fields["labels"] = await checks.known_labels(gh, owner, name, args.labels)
        if args.assignees is not None:
            fields["assignees"] = [a.lstrip("@") for a in args.assignees]
        if args.milestone is not None:
            fields["milestone"] = (
                (await checks.milestone(gh, owner, name, args.milestone))["number"]
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
        if tag:
            total = int((await issue(gh, owner, name, args.number)).get("comments") or 0)
            for found in await last_comments(gh, owner, name, args.number, total):
                if tag in str(found.get("body") or ""):
                    ref = issue_ref(args.repo, args.number)
                    return Outcome(
                        {"commented": True}, f"Commented on {ref}", found.get("html_url")
                    )
        async with errors(f"commenting on {issue_ref(args.repo, args.number)}"):
            response = await gh.rest.issues.async_create_comment(
                owner, name, args.number, body=f"{without_markers(args.body)}\n\n{tag}".strip()
            )
        url = response.json().get("html_url")
        return Outcome(
            {"commented": True}, f"Commented on {issue_ref(args.repo, args.number)}", url
        )

    return [create, update, comment]
