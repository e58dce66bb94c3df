"""A team's pack whose people and channels are marked `x-slack` without a pattern (as an MCP
server's schema may mark them, or match them with Python's `$`, which also matches before a
final newline): the schema alone lets "UBOB\\n" through, so the card and the Edit form must
not read such a value as the person or channel it resembles."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from bot.tools.registry import Change, Outcome, Preview, ToolContext, write_tool

PACK = "loose"
SENT: list[dict[str, Any]] = []


class HandOver(BaseModel):
    model_config = ConfigDict(extra="forbid")

    owner: str = Field(json_schema_extra={"x-slack": "user"})
    channel: str = Field(json_schema_extra={"x-slack": "channel"})
    note: str = ""


async def _preview(args: HandOver, ctx: ToolContext) -> Preview:
    return Preview("Hand the work over", (Change("note", None, args.note),))


@write_tool("hand_over", "Hand a piece of work to someone.", HandOver, preview=_preview)
async def hand_over(args: HandOver, ctx: ToolContext) -> Outcome:
    SENT.append(args.model_dump(mode="json"))
    return Outcome({"ok": True}, "Handed over")


TOOLS = [hand_over]
