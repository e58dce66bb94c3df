"""Linear writes, each a card: names (issue, team, state, assignee, labels, project) resolved
to ids, shown by name and pinned with the proposal, so the run sends the ids the card showed and
never looks a name up again (a project created since under the same name gets nothing). An
update shows each field's current value (compared by id before running, so a renamed state is
not a change, a different state is); a create and a comment ask Linear to use an id derived
from the proposal's key, and a retry that finds that id does not create a second one."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from bot.tools.diffs import digest, key_of, listed, set_change
from bot.tools.packs.linear import resolve
from bot.tools.packs.linear.client import LinearClient, LinearError
from bot.tools.packs.linear.reads import Args
from bot.tools.registry import Change, Outcome, Preview, Tool, ToolContext, write_tool

Priority = Literal["none", "urgent", "high", "medium", "low"]
IssueRef = Field(description="identifier such as ENG-123")


class Fields(Args):
    title: str | None = Field(None, min_length=1, max_length=255)
    description: str | None = Field(None, max_length=50_000)
    priority: Priority | None = None
    assignee: str | None = Field(None, description="a member's name, display name or email")
    labels: list[str] | None = Field(None, description="label names (the full new set)")
    state: str | None = Field(None, description="workflow state name, e.g. In Progress")
    project: str | None = Field(None, description="project name")


class CreateIssue(Fields):
    team: str = Field(description="team key or name, e.g. ENG")
    title: str = Field(min_length=1, max_length=255)


class UpdateIssue(Fields):
    """Fields left null stay as they are."""

    issue: str = IssueRef


class MoveIssue(Args):
    issue: str = IssueRef
    state: str = Field(description="workflow state name, e.g. Done")


class Comment(Args):
    issue: str = IssueRef
    body: str = Field(min_length=1, max_length=50_000)


def _name(node: dict[str, Any] | None) -> str | None:
    return None if not node else node.get("name") or node.get("displayName")


async def _resolved(
    lc: LinearClient, ctx: ToolContext, team: dict[str, Any], args: Fields
) -> dict[str, Any]:
    """Every named field as what it names (with its id), resolved with reads when the card is
    made and pinned with it: the run sends those ids (`ToolContext.resolve`)."""
    out: dict[str, Any] = {}
    if (state := args.state) is not None:
        out["state"] = await ctx.resolve("state", lambda: resolve.state(lc, team, state))
    if (assignee := args.assignee) is not None:
        out["assignee"] = await ctx.resolve("assignee", lambda: resolve.person(lc, assignee))
    if (wanted := args.labels) is not None:
        out["labels"] = await ctx.resolve("labels", lambda: resolve.labels(lc, team, wanted))
    if (project := args.project) is not None:
        out["project"] = await ctx.resolve("project", lambda: resolve.project(lc, project))
    return out


def _brief(found: dict[str, Any]) -> dict[str, Any]:
    return {k: found.get(k) for k in ("id", "identifier", "title", "url", "team")}


async def _pin_issue(ctx: ToolContext, now: dict[str, Any]) -> None:
    """Pin the issue a preview read by its id: an identifier that comes to mean another issue
    (moved between teams, say) does not move the write."""

    async def read() -> dict[str, Any]:
        return _brief(now)

    await ctx.resolve("issue", read)


async def _pinned_issue(lc: LinearClient, ctx: ToolContext, ref: str) -> dict[str, Any]:
    async def lookup() -> dict[str, Any]:
        return _brief(await resolve.issue(lc, ref))

    return await ctx.resolve("issue", lookup)


async def _team(lc: LinearClient, ctx: ToolContext, wanted: str) -> dict[str, Any]:
    return await ctx.resolve("team", lambda: resolve.team(lc, wanted))


def _input(args: Fields, named: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    if args.title is not None:
        data["title"] = args.title
    if args.description is not None:
        data["description"] = args.description
    if args.priority is not None:
        data["priority"] = resolve.PRIORITIES[args.priority]
    for key, field in (("state", "stateId"), ("assignee", "assigneeId"), ("project", "projectId")):
        if key in named:
            data[field] = named[key]["id"]
    if "labels" in named:
        data["labelIds"] = [lb["id"] for lb in named["labels"]]
    return data


def _update_changes(now: dict[str, Any], args: Fields, named: dict[str, Any]) -> list[Change]:
    changes: list[Change] = []
    if args.title is not None:
        changes.append(Change("title", now.get("title"), args.title))
    if args.description is not None:
        old = now.get("description") or ""
        changes.append(
            Change("description", old[:700] or None, args.description[:700], digest(old))
        )
    if args.priority is not None:
        old_priority = resolve.PRIORITY_NAMES.get(int(now.get("priority") or 0))
        changes.append(Change("priority", old_priority, args.priority))
    for key in ("state", "assignee", "project"):
        if key in named:
            current = now.get(key)
            changes.append(
                Change(key, _name(current), _name(named[key]), (current or {}).get("id") or "")
            )
    if "labels" in named:
        old_labels = (now.get("labels") or {}).get("nodes", [])
        shown_old, shown_new = set_change(
            [lb["name"] for lb in old_labels], [lb["name"] for lb in named["labels"]]
        )
        changes.append(
            Change("labels", shown_old, shown_new, key_of([lb["id"] for lb in old_labels]))
        )
    return changes


def write_tools(lc: LinearClient) -> list[Tool[Any]]:
    async def preview_create(args: CreateIssue, ctx: ToolContext) -> Preview:
        team = await _team(lc, ctx, args.team)
        named = await _resolved(lc, ctx, team, args)
        return Preview(
            f"Create a Linear issue in {team['name']} ({team['key']}): {args.title[:150]}",
            (
                Change("team", None, f"{team['name']} ({team['key']})"),
                Change("title", None, args.title),
                Change("description", None, (args.description or "")[:1500] or None),
                Change("priority", None, args.priority),
                Change("assignee", None, _name(named.get("assignee"))),
                Change("labels", None, listed([lb["name"] for lb in named.get("labels", [])])),
                Change("state", None, _name(named.get("state"))),
                Change("project", None, _name(named.get("project"))),
            ),
        )

    @write_tool(
        "linear_create_issue",
        "Create a Linear issue (a person must approve it first).",
        CreateIssue,
        preview=preview_create,
        finds_earlier_write=True,
    )
    async def create(args: CreateIssue, ctx: ToolContext) -> Outcome:
        team = await _team(lc, ctx, args.team)
        data = _input(args, await _resolved(lc, ctx, team, args)) | {"teamId": team["id"]}
        if ctx.idempotency_key:
            data["id"] = resolve.client_id(ctx.idempotency_key, "issue")
            earlier = await resolve.find_issue(lc, data["id"])
            if earlier is not None:  # a retry: it was created before the answer was lost
                return Outcome(
                    {"identifier": earlier["identifier"]},
                    f"Created {earlier['identifier']}",
                    earlier.get("url"),
                )
        made = (await lc.run("CreateIssue", f"creating an issue in {team['key']}", input=data))[
            "issueCreate"
        ]["issue"]
        return Outcome(
            {"identifier": made["identifier"], "url": made["url"]},
            f"Created {made['identifier']}",
            made["url"],
        )

    async def preview_update(args: UpdateIssue, ctx: ToolContext) -> Preview:
        now = await resolve.issue(lc, args.issue)
        await _pin_issue(ctx, now)
        changes = _update_changes(now, args, await _resolved(lc, ctx, now["team"], args))
        what = ", ".join(c.field for c in changes) or "nothing"
        return Preview(
            f"Update {now['identifier']} '{(now.get('title') or '')[:100]}': {what}",
            tuple(changes),
        )

    @write_tool(
        "linear_update_issue",
        "Change a Linear issue's title, description, priority, assignee, labels, state or "
        "project (a person must approve it first). Leave fields null to keep them.",
        UpdateIssue,
        preview=preview_update,
    )
    async def update(args: UpdateIssue, ctx: ToolContext) -> Outcome:
        now = await _pinned_issue(lc, ctx, args.issue)
        data = _input(args, await _resolved(lc, ctx, now["team"], args))
        done = await lc.run(
            "UpdateIssue", f"updating {now['identifier']}", id=now["id"], input=data
        )
        url = done["issueUpdate"]["issue"].get("url")
        return Outcome({"updated": sorted(data)}, f"Updated {now['identifier']}", url)

    async def preview_move(args: MoveIssue, ctx: ToolContext) -> Preview:
        now = await resolve.issue(lc, args.issue)
        await _pin_issue(ctx, now)
        target = await ctx.resolve("state", lambda: resolve.state(lc, now["team"], args.state))
        return Preview(
            f"Move {now['identifier']} '{(now.get('title') or '')[:100]}' to {target['name']}",
            (
                Change(
                    "state",
                    _name(now.get("state")),
                    target["name"],
                    (now.get("state") or {}).get("id"),
                ),
            ),
        )

    @write_tool(
        "linear_move_issue",
        "Move a Linear issue to another workflow state (a person must approve it first).",
        MoveIssue,
        preview=preview_move,
    )
    async def move(args: MoveIssue, ctx: ToolContext) -> Outcome:
        now = await _pinned_issue(lc, ctx, args.issue)
        target = await ctx.resolve("state", lambda: resolve.state(lc, now["team"], args.state))
        await lc.run(
            "UpdateIssue",
            f"moving {now['identifier']}",
            id=now["id"],
            input={"stateId": target["id"]},
        )
        return Outcome(
            {"state": target["name"]},
            f"Moved {now['identifier']} to {target['name']}",
            now.get("url"),
        )

    async def preview_comment(args: Comment, ctx: ToolContext) -> Preview:
        now = await resolve.issue(lc, args.issue)
        await _pin_issue(ctx, now)
        return Preview(
            f"Comment on {now['identifier']} '{(now.get('title') or '')[:100]}'",
            (Change("comment", None, args.body[:1500]),),
        )

    @write_tool(
        "linear_comment",
        "Comment on a Linear issue (a person must approve it first).",
        Comment,
        preview=preview_comment,
        finds_earlier_write=True,
    )
    async def comment(args: Comment, ctx: ToolContext) -> Outcome:
        now = await _pinned_issue(lc, ctx, args.issue)
        data: dict[str, Any] = {"issueId": now["id"], "body": args.body}
        if ctx.idempotency_key:
            data["id"] = resolve.client_id(ctx.idempotency_key, "comment")
            try:
                found = await lc.run("GetComment", "looking for an earlier attempt", id=data["id"])
                if found.get("comment"):
                    return Outcome({"commented": True}, f"Commented on {now['identifier']}")
            except LinearError as exc:
                if "not found" not in str(exc).lower() and "could not find" not in str(exc).lower():
                    raise
        await lc.run("CreateComment", f"commenting on {now['identifier']}", input=data)
        return Outcome({"commented": True}, f"Commented on {now['identifier']}", now.get("url"))

    return [create, update, move, comment]
