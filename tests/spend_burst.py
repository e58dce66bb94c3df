"""Many turns at once against a budget with room for exactly N model calls: shared by
tests/test_spend_lease_burst.py and bench/budgets.py."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from sqlalchemy import select

from bot.db.models import SpendReservation
from bot.spend.prices import Prices
from bot.spend.standing import usd_of
from tests.fakes.openai import MODEL, FakeOpenAI, Script
from tests.fakes.slack import BOT_USER_ID, FakeSlack
from tests.harness import RunningBot


def workspace_policy(name: str, usd: Decimal) -> str:
    """A policy with one workspace budget in dollars, owned by Bob."""
    return (
        "version: 1\ndefault: ask\nbudgets:\n"
        f"  - name: {name}\n    scope: {{workspace: true}}\n    window: day\n"
        f"    usd: {usd}\n    owners: [UBOB]\n"
    )


async def mention(bot: RunningBot, slack: FakeSlack, channel: str, text: str) -> None:
    said = f"<@{BOT_USER_ID}> {text}"
    ts = slack.add_user_message(channel, said)
    await bot.send_event(
        {"type": "app_mention", "user": "UALICE", "text": said, "ts": ts, "channel": channel}
    )


async def estimate_of_one_call(bot: RunningBot) -> int:
    async with bot.countersign.db.reading() as session:
        tokens = await session.scalar(
            select(SpendReservation.estimate_tokens).order_by(SpendReservation.id.desc()).limit(1)
        )
    assert tokens is not None, "the warm-up call reserved nothing"
    return int(tokens)


@dataclass(frozen=True)
class Room:
    prompt: int  # tokens of each call's prompt, as the fake model reports them
    per_call: int  # nano-dollars one call costs (and reserves)
    used_before: int  # nano-dollars the budget had used before the burst
    limit: int  # nano-dollars: the budget's limit now


async def leave_room(
    bot: RunningBot,
    slack: FakeSlack,
    model: FakeOpenAI,
    path: Path,
    name: str,
    calls: int,
    reply_tokens: int,
) -> Room:
    """One warm-up turn measures what a call reserves (the prompt the bot counts, plus
    `reply_tokens`); the fake model is told to report exactly that usage for every call, so a
    call's estimate is what it costs; then the budget `name` (the policy file at `path`) is
    reloaded to leave room for exactly `calls` more calls."""
    words = " ".join(f"w{i}" for i in range(reply_tokens))  # reply_tokens tokens
    model.default = Script(text=words, prompt_tokens=1)
    await mention(bot, slack, "CWARM00", "reply 00 please")  # as long as the others
    await bot.idle(timeout=60)
    prompt = await estimate_of_one_call(bot) - reply_tokens
    model.default = Script(text=words, prompt_tokens=prompt)
    per_call = Prices.load(None).nano(MODEL, prompt, reply_tokens)
    spend = bot.countersign.conversations.spending.ledger()
    assert spend is not None
    before = await spend.standing(name)
    assert before is not None
    # A limit in whole micro-dollars (the policy file's precision), rounded up: room for
    # `calls` calls, and less than a nano-dollar in a thousand more.
    limit = -(-(before.used_nano + calls * per_call) // 1000) * 1000
    await asyncio.to_thread(path.write_text, workspace_policy(name, usd_of(limit)))
    assert await bot.countersign.reload_policy(), "the lowered budget was not put in force"
    return Room(prompt, per_call, before.used_nano, limit)
