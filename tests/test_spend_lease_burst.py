"""Issue 29's burst through the whole bot, with leases (bot/spend/leases.py): 50 turns
mentioned at once against a workspace budget with room for exactly 10 model calls start
exactly 10 calls, the other 40 pause with the "Budget reached" card, nothing is spent past
the limit, and the spend recorded is what the model reported. As bench/budgets.py sets it
up: a warm-up call measures one call's estimate, the model reports exactly that usage, and
a reload leaves room for 10 (the lease granted under the old limit must not outlive it)."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from pathlib import Path

from sqlalchemy import select

from bot.db.models import SpendReservation
from bot.spend.prices import Prices
from bot.spend.standing import usd_of
from tests.fakes.openai import MODEL, FakeOpenAI, Script
from tests.fakes.slack import BOT_USER_ID, FakeSlack
from tests.harness import RunningBot, running

TURNS, ROOM, REPLY_TOKENS = 50, 10, 100
BUDGET = "burst"


def policy(usd: Decimal) -> str:
    return (
        "version: 1\ndefault: ask\nbudgets:\n"
        f"  - name: {BUDGET}\n    scope: {{workspace: true}}\n    window: day\n"
        f"    usd: {usd}\n    owners: [UBOB]\n"
    )


async def mention(bot: RunningBot, slack: FakeSlack, channel: str, text: str) -> None:
    said = f"<@{BOT_USER_ID}> {text}"
    ts = slack.add_user_message(channel, said)
    await bot.send_event(
        {"type": "app_mention", "user": "UALICE", "text": said, "ts": ts, "channel": channel}
    )


async def test_fifty_turns_at_once_against_room_for_ten_start_exactly_ten_calls(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, migrated_database_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(policy(Decimal(1000)))
    prices = Prices.load(None)
    words = " ".join(f"w{i}" for i in range(REPLY_TOKENS))
    async with running(
        fake_slack,
        fake_model,
        migrated_database_url,
        policy_file=path,
        reply_tokens=REPLY_TOKENS,
    ) as bot:
        fake_model.default = Script(text=words, prompt_tokens=1)
        await mention(bot, fake_slack, "CWARM00", "reply 00 please")
        await bot.idle(timeout=60)
        async with bot.countersign.db.reading() as session:
            estimate = await session.scalar(
                select(SpendReservation.estimate_tokens).order_by(SpendReservation.id).limit(1)
            )
        assert estimate is not None
        prompt = int(estimate) - REPLY_TOKENS
        fake_model.default = Script(text=words, prompt_tokens=prompt)
        per_call = prices.nano(MODEL, prompt, REPLY_TOKENS)
        spend = bot.countersign.conversations.spending.ledger()
        assert spend is not None
        before = await spend.standing(BUDGET)
        assert before is not None
        limit = -(-(before.used_nano + ROOM * per_call) // 1000) * 1000  # whole micro-dollars
        path.write_text(policy(usd_of(limit)))
        assert await bot.countersign.reload_policy()
        played = len(fake_model.played)
        await asyncio.gather(
            *(mention(bot, fake_slack, f"C{i:06d}", f"reply {i:02d} please") for i in range(TURNS))
        )
        await bot.idle(timeout=120)
        after = await spend.standing(BUDGET)
        assert after is not None
    calls = fake_model.played[played:]
    assert len(calls) == ROOM
    paused = [
        i
        for i in range(TURNS)
        if any(c.text.startswith("Budget reached") for c in fake_slack.cards(f"C{i:06d}"))
    ]
    assert len(paused) == TURNS - ROOM
    assert after.used_nano <= limit
    assert (after.reserved_nano, after.used_nano - before.used_nano) == (0, ROOM * per_call)
