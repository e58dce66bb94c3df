"""Spend is visible (issue 29): `/usage` through the front door (a plain user, an owner through
a user group, nobody limited), the App Home's "Your usage", and /history's usage per answer;
none of it shows an id in plain text or JSON."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.records.usage_queries import period_starts
from bot.spend.standing import Asker, Reservation, Tokens
from tests.fakes.openai import MODEL, FakeOpenAI, Script
from tests.fakes.slack import TEAM_ID, FakeSlack
from tests.harness import RunningBot, running
from tests.test_home import headers, open_home
from tests.test_records import answer, looks_like_json, texts

POLICY = """\
version: 1
default: ask
budgets:
  - name: workspace-monthly
    scope: {workspace: true}
    window: month
    usd: 300
    owners: [S0FINANCE]
  - name: support-daily
    scope: {channel: C0SUPPORT}
    window: day
    usd: 12
    owners: [UBOB]
  - name: alice-weekly
    scope: {user: UALICE}
    window: week
    tokens: 200000
    owners: [UBOB]
  - name: one-answer
    scope: {per_turn: true}
    window: turn
    usd: 0.5
"""


async def charge(bot: RunningBot, user: str, channel: str, tokens: int) -> None:
    """What a model call for `user`'s request in `channel` used, through the ledger."""
    usage = bot.countersign.records.usage if bot.countersign.records else None
    spend = usage.ledger() if usage is not None else None
    assert spend is not None
    asker = Asker(TEAM_ID, channel, user, frozenset(), frozenset(), f"seed-{channel}")
    held = await spend.reserve(asker, MODEL, tokens, 0)
    assert isinstance(held, Reservation)
    await spend.settle(held, Tokens(tokens, 0), Tokens(tokens, 0))


@pytest.fixture
async def bot(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, tmp_path: Path
) -> AsyncIterator[RunningBot]:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    fake_slack.user_groups["S0FINANCE"] = ["UCAROL"]
    async with running(fake_slack, fake_model, sqlite_url, policy_file=path) as bot:
        yield bot


async def usage_of(bot: RunningBot, slack: FakeSlack, user: str) -> list[dict[str, Any]]:
    status, seconds, key = await bot.command(slack, "/usage", "", user)
    assert status == 200
    assert seconds < 3.0
    shown = await answer(bot, slack, key)
    assert shown["response_type"] == "ephemeral"
    blocks: list[dict[str, Any]] = shown["blocks"]
    no_ids_nor_json(blocks)
    return blocks


def no_ids_nor_json(blocks: Any) -> None:
    """What a person reads: no JSON; ids only inside Slack's mentions and links (<@U…>)."""
    for text in texts(blocks):
        assert not looks_like_json(text), text
        bare = re.sub(r"<[^>]*>", "", text)  # mentions, dates and links
        assert not re.search(r"\b[UCSDGW]0?[A-Z0-9]{6,}\b", bare), text


def shown(blocks: Any) -> str:
    return json.dumps(blocks, ensure_ascii=False)


async def test_usage_shows_a_plain_users_usage_and_the_limits_that_apply_in_that_channel(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Script(text="Here is the plan.", prompt_tokens=1200))
    await bot.mention("C1", "plan the release", fake_slack)
    await bot.idle()
    await charge(bot, "UALICE", "C1", 5000)
    blocks = await usage_of(bot, fake_slack, "UALICE")
    text = " ".join(texts(blocks))
    assert "*Your usage*" in text
    # Her answers' tokens (1,200 prompt and the answer's), at fake-model's shipped price.
    assert re.search(r"\*Today\*\n1,2\d\d tokens, \$0\.000\d", text)
    assert "*This month*" in text
    # The budgets of the workspace, Alice's own and each request's; not #support's.
    used = re.search(r"alice-weekly, ([\d,]+) of 200,000 tokens this week; resets Monday", text)
    assert used
    assert int(used.group(1).replace(",", "")) >= 5000
    assert re.search(r"workspace-monthly, \$[\d.]+ of \$300\.00 this month; resets 1 ", text)
    assert "one-answer, $0.00 of $0.50 this turn" in text
    assert "support-daily" not in text
    assert "raised by <@UBOB>" in text  # owners as mentions
    assert "raised by <!subteam^S0FINANCE>" in text
    assert "Applies to <@UALICE>" in text
    assert "Budgets you own" not in text


async def test_an_owner_through_a_user_group_sees_the_budgets_they_own(
    bot: RunningBot, fake_slack: FakeSlack
) -> None:
    carol = shown(await usage_of(bot, fake_slack, "UCAROL"))
    assert "*Budgets you own*" in carol
    owned = carol[carol.index("Budgets you own") :]
    assert "workspace-monthly" in owned
    assert "you approve raises" in owned
    assert "support-daily" not in owned  # Bob's, not the group's
    bob = shown(await usage_of(bot, fake_slack, "UBOB"))
    owned = bob[bob.index("Budgets you own") :]
    assert "support-daily" in owned
    assert "alice-weekly" in owned
    assert "workspace-monthly" not in owned


async def test_nobody_is_limited_without_budgets_and_an_unpriced_model_shows_tokens(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    async with running(fake_slack, fake_model, sqlite_url, llm_model="unpriced-model") as bot:
        fake_model.script(Script(text="Here is the plan.", prompt_tokens=1200))
        root = await bot.mention("C1", "plan the release", fake_slack)
        await bot.idle()
        text = shown(await usage_of(bot, fake_slack, "UALICE"))
        link = f"<https://test.slack.com/archives/C1/p{root.replace('.', '')}>"
        _, _, key = await bot.command(fake_slack, "/history", link, "UALICE")
        history = shown((await answer(bot, fake_slack, key))["blocks"])
    assert "No spending limits apply to you here." in text
    assert re.search(r"\*Today\*\\n1,2\d\d tokens\"", text)
    assert "unpriced-model has no price set" in text
    assert "Budgets you own" not in text
    assert re.search(r"· 1,2\d\d tokens:", history)
    assert "$" not in history


async def test_the_home_shows_your_usage_and_the_budgets_you_own(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Script(text="Noted."))
    await bot.mention("C0SUPPORT", "a customer is waiting", fake_slack)
    await bot.idle()
    alices = await open_home(bot, fake_slack, "UALICE")
    assert headers(alices) == ["Waiting for you", "Your recent work", "Your usage", "Grants"]
    no_ids_nor_json(alices["blocks"])
    text = shown(alices)
    # Where she talked with the bot lately: #support's budget applies to her too.
    assert "support-daily" in text
    assert "Applies to <#C0SUPPORT>" in text
    assert "alice-weekly" in text
    bobs = await open_home(bot, fake_slack, "UBOB")
    assert "Budgets you own" in headers(bobs)
    no_ids_nor_json(bobs["blocks"])
    assert "support-daily" in shown(bobs)


async def test_history_shows_what_each_answer_used(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Script(text="Here is the plan.", prompt_tokens=1200))
    root = await bot.mention("C1", "plan the release", fake_slack)
    await bot.idle()
    link = f"<https://test.slack.com/archives/C1/p{root.replace('.', '')}>"
    _, _, key = await bot.command(fake_slack, "/history", link, "UALICE")
    detail = (await answer(bot, fake_slack, key))["blocks"]
    no_ids_nor_json(detail)
    # 1,200 prompt tokens and the answer's, at fake-model's shipped price ($0.15 / $0.60 per M)
    assert re.search(r"· 1,2\d\d tokens, \$0\.0002:", shown(detail))


def test_your_usage_is_counted_in_the_policy_files_calendar() -> None:
    """Today, this week (from Monday) and this month begin at local midnight, across a
    daylight-saving change too."""
    sunday_night = datetime(2026, 11, 1, 22, 30, tzinfo=UTC)  # Monday 07:30 in Tokyo
    tokyo = period_starts(sunday_night, "Asia/Tokyo")
    assert tokyo["day"] == tokyo["week"] == datetime(2026, 11, 1, 15, 0, tzinfo=UTC)
    assert tokyo["month"] == datetime(2026, 10, 31, 15, 0, tzinfo=UTC)
    paris = period_starts(datetime(2026, 10, 27, 12, 0, tzinfo=UTC), "Europe/Paris")
    assert paris["day"] == datetime(2026, 10, 26, 23, 0, tzinfo=UTC)  # winter time: UTC+1
    assert paris["week"] == datetime(2026, 10, 25, 23, 0, tzinfo=UTC)  # Monday the 26th
    assert paris["month"] == datetime(2026, 9, 30, 22, 0, tzinfo=UTC)  # summer time: UTC+2
