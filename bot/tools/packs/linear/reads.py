"""Linear reads: they run at once."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from bot.provenance import Source
from bot.tools.packs.linear import resolve
from bot.tools.packs.linear.client import LinearClient
from bot.tools.registry import Outcome, Tool, ToolContext, read_tool


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class SearchIssues(Args):
    query: str = Field(min_length=1, description="words to look for")
    limit: int = Field(10, ge=1, le=50)


class GetIssue(Args):
    issue: str = Field(description="identifier such as ENG-123")


class NoArgs(Args):
    pass


class TeamArg(Args):
    team: str = Field(description="team key or name, e.g. ENG")


def issue_json(issue: dict[str, Any]) -> dict[str, Any]:
    def name(node: dict[str, Any] | None) -> str | None:
        return None if not node else node.get("displayName") or node.get("name")

    return {
        "identifier": issue.get("identifier"),
        "title": issue.get("title"),
        "state": name(issue.get("state")),
        "assignee": name(issue.get("assignee")),
        "priority": resolve.PRIORITY_NAMES.get(int(issue.get("priority") or 0)),
        "labels": [lb["name"] for lb in (issue.get("labels") or {}).get("nodes", [])],
        "project": name(issue.get("project")),
        "cycle": (issue.get("cycle") or {}).get("name") or (issue.get("cycle") or {}).get("number"),
        "team": (issue.get("team") or {}).get("key"),
        "url": issue.get("url"),
        "description": (issue.get("description") or "")[:2000],
    }


def read_tools(lc: LinearClient) -> list[Tool[Any]]:
    @read_tool(
        "linear_search_issues", "Search Linear issues.", SearchIssues, label="Searching Linear"
    )
    async def search(args: SearchIssues, ctx: ToolContext) -> Outcome:
        data = await lc.run("SearchIssues", "searching Linear", term=args.query, first=args.limit)
        found = [issue_json(i) for i in data["searchIssues"]["nodes"]]
        return Outcome({"issues": found}, f"{len(found)} found")

    @read_tool(
        "linear_get_issue",
        "Get a Linear issue: state, assignee, priority, labels, project, cycle, recent comments.",
        GetIssue,
        label="Reading Linear",
    )
    async def get(args: GetIssue, ctx: ToolContext) -> Outcome:
        found = await resolve.issue(lc, args.issue)
        data = issue_json(found)
        data["recent_comments"] = [
            {
                "author": (c.get("user") or {}).get("displayName")
                or (c.get("user") or {}).get("name"),
                "body": (c.get("body") or "")[:800],
            }
            for c in (found.get("comments") or {}).get("nodes", [])
        ]
        authors = sorted({str(c["author"]) for c in data["recent_comments"] if c["author"]})
        said = f", comments by {', '.join(authors)}" if authors else ""
        return Outcome(
            data,
            str(found.get("identifier")),
            found.get("url"),
            source=Source(
                "tool",
                f"Linear issue {found.get('identifier')}{said}",
                link=url if (url := str(found.get("url"))).startswith("https://") else None,
            ),
        )

    @read_tool("linear_list_teams", "List Linear teams.", NoArgs, label="Reading Linear teams")
    async def teams(args: NoArgs, ctx: ToolContext) -> Outcome:
        nodes = (await lc.run("Teams", "listing teams"))["teams"]["nodes"]
        return Outcome({"teams": [{"key": t["key"], "name": t["name"]} for t in nodes]}, "teams")

    @read_tool(
        "linear_list_states",
        "List a Linear team's workflow states.",
        TeamArg,
        label="Reading states",
    )
    async def states(args: TeamArg, ctx: ToolContext) -> Outcome:
        team = await resolve.team(lc, args.team)
        data = await lc.run("WorkflowStates", "listing workflow states", teamId=team["id"])
        found = [{"name": s["name"], "type": s["type"]} for s in data["workflowStates"]["nodes"]]
        return Outcome({"team": team["key"], "states": found}, f"{len(found)} states")

    @read_tool("linear_list_labels", "List Linear issue labels.", NoArgs, label="Reading labels")
    async def labels(args: NoArgs, ctx: ToolContext) -> Outcome:
        nodes = (await lc.run("Labels", "listing labels"))["issueLabels"]["nodes"]
        found = [{"name": lb["name"], "team": (lb.get("team") or {}).get("key")} for lb in nodes]
        return Outcome({"labels": found}, f"{len(found)} labels")

    @read_tool(
        "linear_list_members",
        "List the Linear workspace's members.",
        NoArgs,
        label="Reading members",
    )
    async def members(args: NoArgs, ctx: ToolContext) -> Outcome:
        nodes = (await lc.run("Members", "listing members"))["users"]["nodes"]
        found = [
            {"name": u["name"], "display_name": u.get("displayName")}
            for u in nodes
            if u.get("active", True)
        ]
        return Outcome({"members": found}, f"{len(found)} members")

    return [search, get, teams, states, labels, members]
