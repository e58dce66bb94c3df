"""`SLACK_HISTORY_TIER=1`: an app Slack gives one conversation read a minute, 15 messages a page
(commercially distributed, not in the Marketplace, created after 2025-05-29). The fake Slack
enforces exactly that; the bot joins threads without a 429 and without making a reply wait a
minute for context."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.slack.method_limits import TIER_1_PAGE
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack
from tests.harness import RunningBot, clean_env, make_settings, run_cli, start_bot, stop_bot
from tests.test_settings import BASE


@pytest.fixture
async def tier_one_bot(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> AsyncIterator[RunningBot]:
    fake_slack.as_tier_one_app()
    running = await start_bot(
        make_settings(fake_slack, fake_model, sqlite_url, slack_history_tier=1)
    )
    yield running
    await stop_bot(running)


def busy_thread(slack: FakeSlack, channel: str, replies: int) -> str:
    root = slack.add_user_message(channel, "The deploy failed at 3pm", user="UALICE")
    for n in range(replies):
        slack.add_user_message(channel, f"log line {n}", user="UBOB", thread_ts=root)
    return root


async def test_joining_two_threads_in_a_minute_costs_one_read_and_no_429(
    tier_one_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    first = busy_thread(fake_slack, "C1", 40)
    second = busy_thread(fake_slack, "C2", 5)
    fake_model.script(Script(text="Disk full."), Script(text="Looking."))
    started = time.monotonic()
    await tier_one_bot.mention("C1", "what went wrong?", fake_slack, user="UCAROL", thread_ts=first)
    await tier_one_bot.idle()
    await tier_one_bot.mention("C2", "and here?", fake_slack, user="UCAROL", thread_ts=second)
    await tier_one_bot.idle()
    assert time.monotonic() - started < 30  # the second reply did not wait for the minute
    reads = fake_slack.calls_to("conversations.replies")
    assert len(reads) == 1  # the second join's read was skipped: its minute was spent
    assert [c for c in fake_slack.calls if c.status == 429] == []
    # The first join read one page, the thread's start: its parent and the first replies.
    first_prompt = str(fake_model.requests[0].body["messages"])
    assert "The deploy failed at 3pm" in first_prompt
    assert "log line 0" in first_prompt
    assert f"log line {TIER_1_PAGE}" not in first_prompt
    # The second reply came, without the earlier thread.
    second_prompt = str(fake_model.requests[1].body["messages"])
    assert "and here?" in second_prompt
    assert "log line" not in second_prompt
    assert [m.text for m in fake_slack.bot_messages("C2")][-1:] == ["Looking."]


def test_a_history_tier_slack_does_not_have_is_refused_by_name(tmp_path: Path) -> None:
    result = run_cli(["serve", "--port", "0"], clean_env(**BASE, SLACK_HISTORY_TIER="2"), tmp_path)
    assert result.returncode == 2
    assert "SLACK_HISTORY_TIER is invalid" in result.stderr
