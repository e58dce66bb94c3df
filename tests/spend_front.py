"""A bot with budgets, driven through its front door: the budgets' policy file, the pause
cards it posts and the ledger's word on what was used (tests/test_spend_pause.py,
tests/test_spend_metering.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import select

from bot.db.models import BudgetPause, ResumeRequest
from bot.spend.ledger import Spend
from bot.spend.standing import Standing
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack, StoredMessage
from tests.harness import RunningBot, running

BIG = 5_000  # prompt tokens the fake model reports: one call uses a 3,000-token budget up


def policy(*budgets: str) -> str:
    return "version: 1\ndefault: ask\nbudgets:" + ("\n" + "".join(budgets) if budgets else " []\n")


def budget(scope: str, window: str = "day", tokens: int = 3_000, extra: str = "") -> str:
    return (
        f"  - name: demo\n    scope: {{{scope}}}\n    window: {window}\n"
        f"    tokens: {tokens}\n    owners: [UBOB]\n{extra}"
    )


CHEAPER = "    fallback_model: cheap-model\n"


def alices_budget(tmp_path: Path) -> Path:
    """A policy file with one budget: Alice's, 3,000 tokens a day, `cheap-model` its fallback."""
    path = tmp_path / "policy.yaml"
    path.write_text(policy(budget("user: UALICE", extra=CHEAPER)))
    return path


@asynccontextmanager
async def spend_running(
    slack: FakeSlack, model: FakeOpenAI, database_url: str, path: Path, **settings: Any
) -> AsyncIterator[RunningBot]:
    """A bot under `path`'s budgets whose model reports `BIG` prompt tokens a call, asking
    for 100 reply tokens (so a call's estimate is about its prompt)."""
    model.default = Script(text="An answer.", prompt_tokens=BIG)
    settings.setdefault("reply_tokens", 100)
    async with running(slack, model, database_url, policy_file=path, **settings) as bot:
        yield bot


def spend_of(bot: RunningBot) -> Spend:
    spend = bot.countersign.conversations.spending.ledger()
    assert spend is not None
    return spend


async def standing(bot: RunningBot, key: str | None = None, name: str = "demo") -> Standing:
    """The budget's use in its current window (or `key`'s), as the ledger tells it."""
    found = await spend_of(bot).standing(name, key)
    assert found is not None
    return found


def pause_cards(slack: FakeSlack, channel: str = "C1") -> list[StoredMessage]:
    return [c for c in slack.cards(channel) if c.text.startswith("Budget reached")]


def buttons(card: StoredMessage) -> list[str]:
    return [
        str(e.get("action_id"))
        for b in card.blocks or []
        if b.get("type") == "actions"
        for e in b.get("elements", [])
    ]


async def ask(bot: RunningBot, slack: FakeSlack, text: str, user: str = "UALICE") -> str:
    root = await bot.mention("C1", text, slack, user=user)
    await bot.idle()
    return root


async def pauses(bot: RunningBot) -> list[BudgetPause]:
    async with bot.countersign.db.transaction() as session:
        return list((await session.scalars(select(BudgetPause).order_by(BudgetPause.id))).all())


async def resumed(bot: RunningBot, model: FakeOpenAI, requests: int) -> None:
    """Wait for the resume worker (kicked by the click) to ask the model again."""
    for _ in range(100):
        await bot.idle()
        if len(model.requests) >= requests:
            await bot.idle()
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{len(model.requests)} model requests, not {requests}")


async def outbox(bot: RunningBot) -> list[ResumeRequest]:
    async with bot.countersign.db.transaction() as session:
        return list((await session.scalars(select(ResumeRequest))).all())
