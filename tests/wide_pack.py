"""A team's own pack with a wide write (16 arguments, 25 preview fields), for the card tests:
more than a card has room for, so the rest sits behind "…and N more fields"."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from bot.tools.registry import Change, Outcome, Preview, ToolContext, write_tool

PACK = "wide"
FIELDS = [f"f{i:02d}" for i in range(1, 17)]
SENT: list[dict[str, Any]] = []  # what each run received


class WideForm(BaseModel):
    model_config = ConfigDict(extra="forbid")

    f01: str = Field(max_length=5000)
    f02: str = Field(max_length=5000)
    f03: str = Field(max_length=5000)
    f04: str = Field(max_length=5000)
    f05: str = Field(max_length=5000)
    f06: str = Field(max_length=5000)
    f07: str = Field(max_length=5000)
    f08: str = Field(max_length=5000)
    f09: str = Field(max_length=5000)
    f10: str = Field(max_length=5000)
    f11: str = Field(max_length=5000)
    f12: str = Field(max_length=5000)
    f13: str = Field(max_length=5000)
    f14: str = Field(max_length=5000)
    f15: str = Field(max_length=5000)
    f16: str = Field(max_length=5000)


async def _preview(args: WideForm, ctx: ToolContext) -> Preview:
    changes = tuple(Change(f"setting {i:02d}", None, f"value {i:02d}") for i in range(1, 26))
    return Preview("Fill in the wide form", changes)


@write_tool("wide_form", "Fill in a form with many fields.", WideForm, preview=_preview)
async def wide_form(args: WideForm, ctx: ToolContext) -> Outcome:
    SENT.append(args.model_dump())
    return Outcome({"ok": True}, "Form filled")


TOOLS = [wide_form]
