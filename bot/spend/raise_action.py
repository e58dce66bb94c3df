"""The `budget_raise` action (issue 29): asking for more room in one window of a budget is a
proposal like any write. Its name, pack and arguments are shared by the one door (which
routes it to the budget's owners), the tool that applies it and the form that asks for it.

A raise names the limits the window should have ("raise to"), not an amount to add: what the
approvers saw is what the window ends with, however the limit moved since (another raise, a
reload), and applying it again adds nothing."""

from __future__ import annotations

from decimal import Decimal

from pydantic import BaseModel, ConfigDict, Field

from bot.spend.windows import PERIOD, money

RAISE_TOOL = "budget_raise"
RAISE_PACK = "budgets"
MAX_USD = Decimal(1_000_000)  # a budget's own bound (`Budget.usd`): a limit past it is absurd
MAX_TOKENS = 10**12
REASON_MAX = 500


class RaiseArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")

    budget: str = Field(min_length=1, max_length=100, description="The budget's name")
    window: str = Field(min_length=1, max_length=128, description="Which window it raises")
    usd: Decimal | None = Field(
        None, gt=0, le=MAX_USD, decimal_places=2, description="The window's new money limit"
    )
    tokens: int | None = Field(None, gt=0, le=MAX_TOKENS, description="Its new token limit")
    reason: str | None = Field(None, max_length=REASON_MAX, description="Why, in the asker's words")


def limit_money(nano: int | None) -> str:
    return "no limit" if nano is None else money(nano)


def tokens_text(count: int | None) -> str:
    return "no limit" if count is None else f"{count:,} tokens"


def when(window: str) -> str:
    return PERIOD.get(window, "in this window")
