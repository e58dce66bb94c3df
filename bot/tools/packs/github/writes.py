"""GitHub writes: each one a card built from GitHub's data as it is now.

An update shows every field it touches with its current value; labels and assignees say what is
added and removed. The executor previews again just before running and refuses if any shown
value moved (compared by value: label names, logins, a body's hash, a milestone's number). A
merge pins the head commit the approver saw and passes it to GitHub, which refuses the merge if
the branch moved. Creates and comments carry the proposal's key in a hidden marker, and a retry
looks for it before writing again.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from bot.tools.packs.github import checks
from bot.tools.packs.github.client import GitHubClient, errors
from bot.tools.packs.github.reads import issue, last_comments, pull_request
from bot.tools.packs.github.shapes import (
    Args,
    MergeMethod,
    Number,
    Repo,
    State,
    clip,
    digest,
    key_of,
    listed,
    marker,
    names,
    set_change,
    without_markers,
)
from bot.tools.registry import Change, Outcome, Preview, Tool, ToolContext, ToolError, write_tool


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


class RequestReviewers(Args):
    repo: str = Repo
    number: int = Field(ge=1, description="the pull request number")
    reviewers: list[str] = Field(min_length=1, description="GitHub logins")


class Merge(Args):
    repo: str = Repo
    number: int = Field(ge=1, description="the pull request number")
    method: MergeMethod = "merge"


def _ref(repo: str, number: int) -> str:
    return f"{repo}#{number}"


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
                    ref = _ref(args.repo, found["number"])
                    return Outcome({"number": found["number"]}, f"Created {ref}", found["html_url"])
        stone = await checks.milestone(gh, owner, name, args.milestone) if args.milestone else {}
        async with errors(f"creating an issue in {args.repo}"):
            response = await gh.rest.issues.async_create(
                owner,
                name,
                title=args.title,
                body=f"{without_markers(args.body)}\n\n{tag}".strip(),
                labels=args.labels or [],
                assignees=[a.lstrip("@") for a in args.assignees or []],
                milestone=stone.get("number"),
            )
        made = response.json()
        ref = _ref(args.repo, made["number"])
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
            f"Update {kind} {_ref(args.repo, args.number)} '{clip(now.get('title'), 100)}': {what}",
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
            for k, v in args.model_dump(include={"title", "body", "state", "labels"}).items()
            if v is not None
        }
        if args.assignees is not None:
            fields["assignees"] = [a.lstrip("@") for a in args.assignees]
        if args.milestone is not None:
            fields["milestone"] = (
                (await checks.milestone(gh, owner, name, args.milestone))["number"]
                if args.milestone
                else None
            )
        async with errors(f"updating {_ref(args.repo, args.number)}"):
            response = await gh.rest.issues.async_update(owner, name, args.number, data=fields)
        url = response.json().get("html_url")
        return Outcome({"updated": sorted(fields)}, f"Updated {_ref(args.repo, args.number)}", url)

    async def preview_comment(args: Comment, ctx: ToolContext) -> Preview:
        owner, name = gh.split(args.repo)
        now = await issue(gh, owner, name, args.number)
        return Preview(
            f"Comment on {_ref(args.repo, args.number)} '{clip(now.get('title'), 100)}'",
            (Change("comment", None, clip(args.body, 1500)),),
        )

    @write_tool(
        "github_comment",
        "Comment on a GitHub issue or pull request (a person must approve it first).",
        Comment,
        preview=preview_comment,
    )
    async def comment(args: Comment, ctx: ToolContext) -> Outcome:
        owner, name = gh.split(args.repo)
        tag = marker(ctx.idempotency_key) if ctx.idempotency_key else ""
        if tag:
            total = int((await issue(gh, owner, name, args.number)).get("comments") or 0)
            for found in await last_comments(gh, owner, name, args.number, total):
                if tag in str(found.get("body") or ""):
                    ref = _ref(args.repo, args.number)
                    return Outcome(
                        {"commented": True}, f"Commented on {ref}", found.get("html_url")
                    )
        async with errors(f"commenting on {_ref(args.repo, args.number)}"):
            response = await gh.rest.issues.async_create_comment(
                owner, name, args.number, body=f"{without_markers(args.body)}\n\n{tag}".strip()
            )
        url = response.json().get("html_url")
        return Outcome({"commented": True}, f"Commented on {_ref(args.repo, args.number)}", url)

    async def preview_reviewers(args: RequestReviewers, ctx: ToolContext) -> Preview:
        owner, name = gh.split(args.repo)
        pr = await pull_request(gh, owner, name, args.number)
        old = names(pr.get("requested_reviewers"), "login")
        new = sorted({*old, *(r.lstrip("@") for r in args.reviewers)}, key=str.lower)
        shown_old, shown_new = set_change(old, new, "@")
        return Preview(
            f"Request reviews on {_ref(args.repo, args.number)} '{clip(pr.get('title'), 100)}'",
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
        async with errors(f"requesting reviews on {_ref(args.repo, args.number)}"):
            await gh.rest.pulls.async_request_reviewers(owner, name, args.number, reviewers=logins)
        return Outcome(
            {"requested": logins}, f"Requested reviews on {_ref(args.repo, args.number)}"
        )

    async def preview_merge(args: Merge, ctx: ToolContext) -> Preview:
        owner, name = gh.split(args.repo)
        pr = await pull_request(gh, owner, name, args.number)
        if pr.get("merged"):
            raise ToolError(f"{_ref(args.repo, args.number)} is already merged")
        if pr.get("state") != "open":
            raise ToolError(f"{_ref(args.repo, args.number)} is closed; it cannot be merged")
        head = str((pr.get("head") or {}).get("sha") or "")
        return Preview(
            f"Merge pull request {_ref(args.repo, args.number)} '{clip(pr.get('title'), 100)}' "
            f"into {(pr.get('base') or {}).get('ref')}",
            (
                Change("merge method", None, args.method),
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
        # The head the approver saw: GitHub refuses (409) if the branch moved since.
        head = ctx.pin or str((await pull_request(gh, owner, name, args.number))["head"]["sha"])
        async with errors(f"merging {_ref(args.repo, args.number)}"):
            response = await gh.rest.pulls.async_merge(
                owner, name, args.number, sha=head, merge_method=args.method
            )
        sha = response.json().get("sha")
        return Outcome({"merged": True, "sha": sha}, f"Merged {_ref(args.repo, args.number)}")

    return [create, update, comment, reviewers, merge]
