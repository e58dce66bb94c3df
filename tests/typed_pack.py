"""A team's own pack whose one write has an argument of every kind a form can offer (people,
channels, dates, a date-time, choices, numbers, a box to tick, words, long text), for the Edit
modal's tests."""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from bot.tools.registry import Change, Outcome, Preview, ToolContext, write_tool

PACK = "typed"
USER = r"^[UW][A-Z0-9]+$"
CHANNEL = r"^[CG][A-Z0-9]+$"
SENT: list[dict[str, Any]] = []  # what each run received


class PlanWork(BaseModel):
    model_config = ConfigDict(extra="forbid")

    owner: str = Field(pattern=USER)
    reviewer: str | None = Field(None, pattern=USER)
    watchers: list[Annotated[str, Field(pattern=USER)]] = []
    channel: str = Field(pattern=CHANNEL)
    also_in: list[Annotated[str, Field(pattern=CHANNEL)]] = []
    due_date: date | None = None
    starts_at: datetime
    priority: Literal["low", "normal", "high", "urgent"] = "normal"
    size: Literal["small", "medium", "large"] | None = None
    estimate_hours: int = Field(1, ge=1, le=40)
    budget: float | None = Field(None, ge=0, le=1000)
    billable: bool = False
    labels: list[str] = []
    notes: str = Field("", max_length=4000)


async def _preview(args: PlanWork, ctx: ToolContext) -> Preview:
    return Preview("Plan the work", (Change("owner", None, args.owner),))


@write_tool("plan_work", "Plan a piece of work.", PlanWork, preview=_preview)
async def plan_work(args: PlanWork, ctx: ToolContext) -> Outcome:
    SENT.append(args.model_dump(mode="json"))
    return Outcome({"ok": True}, "Planned")


TOOLS = [plan_work]
