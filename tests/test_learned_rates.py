"""Budgets are learned, not assumed: each streaming method starts at Slack's documented floor,
a 429 lowers its rate (for that method only), saturated stretches without a 429 raise it (fast
until the first 429, slowly after), replicas share what they learned through Redis, and the
rates are exported as metrics. The fake Slack decides what Slack allows; the bot is not told."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis.asyncio import Redis

from bot.slack import learned_rates
from bot.slack.budgets import APPEND, UPDATE, Limits, WorkspaceBudgets
from bot.slack.edit_budget import EditBudget
from bot.slack.learned_rates import LearnedRate
from bot.slack.stream_slots import START, STOP
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack, Limit, wait_until
from tests.harness import OPERATOR, RunningBot, make_settings, start_bot, stop_bot
from tests.test_replicas import REDIS_URL, Editor

WORDS = " ".join(f"word{i}" for i in range(120))
LONG = " ".join(f"word{i}" for i in range(600))  # 15 s at 40 tokens a second


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def rate(floor: int = 100, ceiling: int = 600) -> tuple[LearnedRate, Clock, list[int]]:
    clock, applied = Clock(), list[int]()
    return LearnedRate(APPEND, floor, ceiling, applied.append, clock), clock, applied


def test_a_rate_starts_at_the_floor_and_goes_under_it_only_while_429s_continue() -> None:
    learned, clock, applied = rate()
    assert learned.limit == 100
    learned.refused()  # one 429 at the documented floor: a strike, not a decrease
    assert learned.limit == 100
    clock.now += learned_rates.EPOCH_SECONDS
    learned.refused()  # another, after the first one's window: 429s continue at the floor
    assert learned.limit == 50
    assert applied == [50]  # the window was resized with it
    for _ in range(10):
        clock.now += learned_rates.EPOCH_SECONDS
        learned.refused()
    assert learned.limit == 25  # never below a quarter of the floor


def epoch(learned: LearnedRate, clock: Clock, saturated: bool = True) -> None:
    if saturated:
        learned.saturated()
    clock.now += learned_rates.EPOCH_SECONDS
    learned.tick()


def test_slow_start_then_back_to_the_last_good_rate_then_rare_small_probes() -> None:
    learned, clock, _ = rate()
    for _ in range(3):
        epoch(learned, clock)
    assert learned.limit == 337  # 100 -> 150 -> 225 -> 337: slow start
    learned.refused()  # 337 was too much; 225 held a saturated epoch
    assert learned.limit == 225
    assert not learned.slow_start
    for _ in range(int(learned_rates.PROBE_EVERY_SECONDS // learned_rates.EPOCH_SECONDS) - 1):
        epoch(learned, clock)
    assert learned.limit == 225  # no probe before PROBE_EVERY_SECONDS: few 429s
    epoch(learned, clock)
    assert learned.limit == 235  # + a tenth of the floor
    learned.refused()
    assert learned.limit == 225
    clock.now += learned_rates.EPOCH_SECONDS
    learned.refused()  # refused at a proven rate: the limit went down, halve (to the floor)
    assert learned.limit == 112
    clock.now += learned_rates.EPOCH_SECONDS
    learned.refused()
    assert learned.limit == 100  # not under the documented floor on the way down


def test_a_probe_is_not_trusted_until_it_held() -> None:
    """Only the floor or a rate proven good is spread over the pace's horizon; the room a
    probe adds is reached at the sustainable pace (bot/slack/pacing.py)."""
    learned, clock, _ = rate()
    assert learned.trusted == 100
    epoch(learned, clock)  # a full epoch proves 100 and probes 150
    assert (learned.limit, learned.trusted) == (150, 100)
    epoch(learned, clock)
    assert (learned.limit, learned.trusted) == (225, 150)
    learned.refused()
    assert (learned.limit, learned.trusted) == (150, 150)
    clock.now += learned_rates.EPOCH_SECONDS
    learned.refused()  # refused at a proven rate: halved, but the floor holds
    assert (learned.limit, learned.trusted) == (100, 100)
    clock.now += learned_rates.EPOCH_SECONDS
    learned.refused()  # refused at the floor: a strike
    clock.now += learned_rates.EPOCH_SECONDS
    learned.refused()  # and again: under the floor, all of it is trusted
    assert (learned.limit, learned.trusted) == (50, 50)


async def test_a_budget_spreads_only_the_trusted_part_of_its_window() -> None:
    budget = EditBudget(150, reserve_finals=False, window_seconds=6.0)  # a 1 s horizon
    budget.trusted = lambda: 100
    await budget.acquire(Editor(last_edit_at=0.0))
    assert budget.pace.rate == pytest.approx(100, abs=2)  # not 150 a second
    budget.trusted = None
    await budget.acquire(Editor(last_edit_at=0.0))
    assert budget.pace.rate == pytest.approx(150, abs=3)
    await budget.stop()


def test_an_unsaturated_or_refused_epoch_raises_nothing() -> None:
    learned, clock, _ = rate()
    epoch(learned, clock, saturated=False)
    assert learned.limit == 100  # a quiet workspace teaches nothing
    learned.saturated()
    learned.refused()
    clock.now += learned_rates.EPOCH_SECONDS
    learned.tick()
    assert learned.limit == 100  # saturated, but refused: not raised (nor lowered: the floor)


@given(st.lists(st.sampled_from(["saturated", "refused", "epoch"]), max_size=200))
def test_a_rate_stays_between_a_quarter_of_the_floor_and_the_ceiling(events: list[str]) -> None:
    learned, clock, applied = rate(floor=20, ceiling=60)
    for event in events:
        if event == "saturated":
            learned.saturated()
        elif event == "refused":
            learned.refused()
        else:
            clock.now += learned_rates.EPOCH_SECONDS
            learned.tick()
        assert 5 <= learned.limit <= 60
    assert all(5 <= a <= 60 for a in applied)


async def test_a_429_lowers_only_the_method_that_got_it(native_bot: RunningBot) -> None:
    budgets = native_bot.countersign.budgets
    assert budgets is not None
    before = {m: r.limit for m, r in budgets.learned.items()}
    assert before == {UPDATE: 50, APPEND: 100, START: 20, STOP: 20}  # the documented floors
    budgets.learned[APPEND].adopt(200, slow_start=True)  # appends probe above their floor
    budgets.rate_limited(START, 1.0)
    after = {m: r.limit for m, r in budgets.learned.items()}
    assert after == {**before, APPEND: 200}  # a start's 429 (at its floor) lowers no other
    budgets.rate_limited(APPEND, 1.0)
    after = {m: r.limit for m, r in budgets.learned.items()}
    assert after == {**before, APPEND: 100}  # appends halved, starts kept
    assert budgets.appends.per_minute == 100


@pytest.fixture
async def redis() -> AsyncIterator[Redis]:
    client = Redis.from_url(REDIS_URL)
    yield client
    await client.aclose()


async def test_replicas_share_what_they_learned(
    redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(learned_rates, "EPOCH_SECONDS", 3600.0)
    monkeypatch.setattr("bot.slack.budgets.SHARE_EVERY_SECONDS", 0.1)
    workspace = f"xoxb-{uuid.uuid4().hex}"
    first = WorkspaceBudgets(Limits(), redis, workspace_key=workspace)
    second = WorkspaceBudgets(Limits(), redis, workspace_key=workspace)
    elsewhere = WorkspaceBudgets(Limits(), redis, workspace_key=f"xoxb-{uuid.uuid4().hex}")
    try:
        for budgets in (first, second, elsewhere):  # all had learned 200 appends a minute
            budgets.learned[APPEND].adopt(200.0, slow_start=False)
        first.rate_limited(APPEND, 0.1)  # only the first replica got the 429
        second._keep_learning()
        elsewhere._keep_learning()
        await wait_until(lambda: second.learned[APPEND].limit == 100, timeout=5)
        assert second.appends.per_minute == 100
        assert elsewhere.learned[APPEND].limit == 200  # another workspace learns its own
    finally:
        for budgets in (first, second, elsewhere):
            await budgets.stop()


async def test_a_workspace_that_gives_more_gets_used_and_a_429_is_learned_from(
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    sqlite_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Slack allows 300 appends a minute here: eight replies streaming at once (edits are made
    scarce, so every reply streams natively) keep the append budget saturated, and (with
    one-second epochs) the learned rate climbs past the floor the
    bot started from. Then a 429: the rate goes back to the last one that held a saturated
    stretch (the probe went too far), the slow start ends, and the metrics show the rate."""
    monkeypatch.setattr(learned_rates, "EPOCH_SECONDS", 1.0)
    fake_slack.limits["chat.appendStream"] = Limit(300, 60.0)
    native_bot = await start_bot(
        make_settings(
            fake_slack, fake_model, sqlite_url, streaming="auto", slack_edit_budget_per_minute=4
        )
    )
    try:
        await _saturate_then_refuse(native_bot, fake_slack, fake_model)
    finally:
        await stop_bot(native_bot)


async def _saturate_then_refuse(
    native_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    for i in range(8):
        fake_model.script_for(f"question {i}", Script(text=LONG, tokens_per_second=40))
    await asyncio.gather(
        *(native_bot.mention(f"C{i}", f"question {i}", fake_slack) for i in range(8))
    )
    await native_bot.idle(timeout=60)
    assert len([c for c in range(8) if fake_slack.streamed_messages(f"C{c}")]) == 8
    budgets = native_bot.countersign.budgets
    assert budgets is not None
    climbed = budgets.learned[APPEND].limit
    assert climbed > 100
    assert all(c.status != 429 for c in fake_slack.calls)

    fake_slack.limits["chat.appendStream"] = Limit(1, 60.0)
    fake_model.script(Script(text=WORDS, tokens_per_second=40))
    await native_bot.mention("C9", "one more", fake_slack)
    await native_bot.idle(timeout=60)
    assert any(c.status == 429 for c in fake_slack.calls_to("chat.appendStream"))
    learned = budgets.learned[APPEND]
    assert not learned.slow_start  # the first 429 ended the slow start
    # Back to the last rate that filled the window without a 429, or half the rate refused:
    # either way no more than Slack gave (300), whatever the pacing had climbed to.
    assert learned.limit <= 300
    async with native_bot.session.get(native_bot.url + "/metrics", headers=OPERATOR) as answer:
        text = await answer.text()
    shown = f'countersign_slack_learned_rate_per_minute{{method="{APPEND}"}}'
    assert shown in text
