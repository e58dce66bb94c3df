"""Issue 29's burst through the whole bot, with leases (bot/spend/leases.py): 30 turns
mentioned at once against a workspace budget with room for exactly 6 model calls start
exactly 6 calls, the other 24 pause with the "Budget reached" card, nothing is spent past
the limit, and the spend recorded is what the model reported (bench/budgets.py runs the
issue's 50 against 10: every turn ends with a chat.update, and Slack allows 50 a minute, so
here a burst that fits in one minute's edits). As bench/budgets.py sets it
up: a warm-up call measures one call's estimate, the model reports exactly that usage, and
a reload leaves room for 10 (the lease granted under the old limit must not outlive it)."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from pathlib import Path

from tests.fakes.openai import FakeOpenAI
from tests.fakes.slack import FakeSlack
from tests.harness import running
from tests.spend_burst import leave_room, mention, workspace_policy

TURNS, ROOM, REPLY_TOKENS = 30, 6, 100
BUDGET = "burst"


async def test_thirty_turns_at_once_against_room_for_six_start_exactly_six_calls(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, migrated_database_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(workspace_policy(BUDGET, Decimal(1000)))
    async with running(
        fake_slack,
        fake_model,
        migrated_database_url,
        policy_file=path,
        reply_tokens=REPLY_TOKENS,
    ) as bot:
        room = await leave_room(bot, fake_slack, fake_model, path, BUDGET, ROOM, REPLY_TOKENS)
        spend = bot.countersign.conversations.spending.ledger()
        assert spend is not None
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
    assert after.used_nano <= room.limit
    assert (after.reserved_nano, after.used_nano - room.used_before) == (0, ROOM * room.per_call)
