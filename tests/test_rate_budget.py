"""Many live replies share one chat.update budget and all land their exact final text."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack, Limit
from tests.harness import RunningBot, make_settings, start_bot, stop_bot


@pytest.fixture
async def limited_bot(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> AsyncIterator[RunningBot]:
    fake_slack.limits["chat.update"] = Limit(50, 60.0)
    fake_slack.limits["chat.postMessage"] = Limit(20, 60.0, per_channel=True)
    running = await start_bot(
        make_settings(fake_slack, fake_model, sqlite_url, slack_edit_budget_per_minute=50)
    )
    yield running
    await stop_bot(running)


def text_for(i: int) -> str:
    return " ".join(f"r{i}w{j}" for j in range(60))


async def test_twenty_concurrent_replies_stay_within_the_budget(
    limited_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(
        *[
            Script(text=text_for(i), time_to_first_token=0.3, tokens_per_second=40)
            for i in range(20)
        ]
    )
    await asyncio.gather(*[limited_bot.mention(f"C{i}", "go", fake_slack) for i in range(20)])
    await limited_bot.idle(timeout=60)

    finals = sorted(fake_slack.bot_messages(f"C{i}")[0].text for i in range(20))
    assert finals == sorted(text_for(i) for i in range(20))
    assert all(len(fake_slack.bot_messages(f"C{i}")) == 1 for i in range(20))
    updates = fake_slack.calls_to("chat.update")
    assert [c for c in updates if c.status == 429] == []
    assert len(updates) <= 50
    assert limited_bot.countersign.budget.rate_limited_total == 0
    # The budget is shared, not spent by the first replies alone: most replies showed
    # progress before their final text.
    progressed = sum(
        1 for i in range(20) if len(fake_slack.history[fake_slack.bot_messages(f"C{i}")[0].ts]) >= 3
    )
    assert progressed >= 10


async def test_a_429_pauses_edits_and_the_final_text_still_lands(
    limited_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """Slack's limit is lower than the configured budget: the SDK handler reports the 429,
    the budget pauses everyone for Retry-After, and the reply completes."""
    fake_slack.limits["chat.update"] = Limit(2, 3.0)
    text = " ".join(f"w{j}" for j in range(40))
    fake_model.script(Script(text=text, tokens_per_second=20))
    await limited_bot.mention("C1", "go", fake_slack)
    await limited_bot.idle(timeout=60)
    assert fake_slack.bot_messages("C1")[0].text == text
    assert limited_bot.countersign.budget.rate_limited_total >= 1
