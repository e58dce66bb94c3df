"""An example tool pack: who is on call, and changing it with approval.

Enable it with TOOL_PACKS=bot.tools.packs.tasks,bot.tools.packs.slack,examples.oncall_pack
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from bot.tools.registry import Change, Outcome, Preview, ToolContext, read_tool, write_tool

PACK = "oncall"
ROTA: dict[str, str] = {"payments": "U0ALICE", "search": "U0BOB"}  # stands in for your system


class WhoIsOnCall(BaseModel):
    team: str = Field(description="team name, e.g. payments")


class SetOnCall(BaseModel):
    team: str
    user: str = Field(pattern=r"^[UW][A-Z0-9]{2,}$", description="Slack user id")


@read_tool("who_is_on_call", "Who is on call for a team.", WhoIsOnCall, label="Checking the rota")
async def who_is_on_call(args: WhoIsOnCall, ctx: ToolContext) -> Outcome:
    return Outcome({"team": args.team, "user": ROTA.get(args.team)}, "rota read")


async def preview_set_on_call(args: SetOnCall, ctx: ToolContext) -> Preview:
    current = ROTA.get(args.team)
    return Preview(
        f"Put {await ctx.user_label(args.user)} on call for {args.team}",
        (
            Change(
                "on call",
                await ctx.user_label(current) if current else None,
                await ctx.user_label(args.user),
            ),
        ),
    )


@write_tool(
    "set_on_call", "Change who is on call (needs approval).", SetOnCall, preview=preview_set_on_call
)
async def set_on_call(args: SetOnCall, ctx: ToolContext) -> Outcome:
    ROTA[args.team] = args.user  # a real pack would call its API with ctx.idempotency_key
    return Outcome({"team": args.team, "user": args.user}, f"{args.team} on call changed")


TOOLS = [who_is_on_call, set_on_call]
