"""Learned rates that a burst of 429s cannot wreck (issue 28): thirty refusals in flight lower a
rate once; a rate goes under Slack's documented floor only while 429s continue at the floor,
and is back at the floor within a minute once they stop; an absurd `Retry-After` (inf, huge,
garbage) is capped and logged once, through the bot's own Slack client against the fake Slack.
Clocks are injected: nothing here waits for real minutes."""

from __future__ import annotations

import contextlib
import itertools
import logging
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from slack_sdk.errors import SlackApiError

from bot.slack import learned_rates
from bot.slack.budgets import APPEND, UPDATE, Limits, WorkspaceBudgets
from bot.slack.learned_rates import EPOCH_SECONDS, LearnedRate
from bot.slack.web_client import web_client
from tests.fakes.slack import BOT_TOKEN, FakeSlack, Limit


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def appends(floor: int = 100) -> tuple[LearnedRate, Clock, list[int]]:
    clock, applied = Clock(), list[int]()
    return LearnedRate(APPEND, floor, floor * 6, applied.append, clock), clock, applied


def burst(learned: LearnedRate, calls: int = 30, retry_after: float | None = 1.0) -> None:
    """`calls` appends in flight, all refused within the same second."""
    for _ in range(calls):
        learned.refused(retry_after)


def test_a_burst_of_429s_lowers_a_rate_once_and_never_under_the_floor_on_the_way_down() -> None:
    learned, clock, applied = appends()
    for _ in range(3):  # slow start: 100 -> 150 -> 225 -> 337, each saturated epoch proven
        learned.saturated()
        clock.now += EPOCH_SECONDS
        learned.tick()
    assert learned.limit == 337
    burst(learned)
    assert learned.limit == 225  # back to the last rate proven good, once (not 337 / 2**30)
    clock.now += 5
    burst(learned)  # more refusals of the same episode (calls sent before the decrease)
    assert learned.limit == 225
    clock.now += EPOCH_SECONDS
    burst(learned)  # a new episode at a proven rate: Slack's limit went down, halve
    assert learned.limit == 112
    clock.now += EPOCH_SECONDS
    burst(learned)
    assert learned.limit == 100  # halving would give 56: the documented floor holds
    clock.now += EPOCH_SECONDS
    burst(learned)  # refused AT the floor: a strike, still the floor
    assert learned.limit == 100
    clock.now += EPOCH_SECONDS
    burst(learned)  # and again after a full window at the floor: 429s continue, under it
    assert learned.limit == 50
    assert applied == [150, 225, 337, 225, 112, 100, 50]  # one resize per episode


def test_an_episode_lasts_as_long_as_its_retry_after_capped_at_a_minute() -> None:
    learned, clock, _ = appends()
    learned.adopt(400, slow_start=False)
    learned.refused(45.0)
    assert learned.limit == 200
    clock.now = 44.0
    learned.refused(45.0)  # within the Retry-After: calls that were waiting for it
    assert learned.limit == 200
    clock.now = 46.0
    learned.refused(45.0)
    assert learned.limit == 100
    for absurd in (math.inf, 1e9):
        learned, clock, _ = appends()
        learned.adopt(400, slow_start=False)
        learned.refused(absurd)
        clock.now = learned_rates.RETRY_AFTER_CAP_SECONDS
        learned.refused(absurd)
        assert learned.limit == 100  # the second episode began after the cap, not never
    learned, clock, _ = appends()
    learned.adopt(400, slow_start=False)
    learned.refused(math.nan)
    clock.now = EPOCH_SECONDS
    learned.refused(math.nan)
    assert learned.limit == 100  # no usable Retry-After: an epoch


def test_a_lone_429_at_the_floor_long_after_the_last_one_is_a_strike_again() -> None:
    learned, clock, _ = appends()
    learned.refused()
    clock.now += 600  # ten quiet minutes
    learned.tick()
    learned.refused()
    assert learned.limit == 100  # 429s did not continue: a new strike, not a decrease


def run(learned: LearnedRate, clock: Clock, seconds: int) -> list[int]:
    """The learning loop's ticks, once a second; the limit after each."""
    limits = []
    for _ in range(seconds):
        clock.now += 1
        learned.tick()
        limits.append(learned.limit)
    return limits


def test_under_the_floor_the_rate_is_back_at_the_floor_within_a_minute() -> None:
    learned, clock, _ = appends()
    for _ in range(5):  # 429s continuing at the floor: down to a quarter of it
        clock.now += EPOCH_SECONDS
        learned.refused(1.0)
    assert learned.limit == 25
    while_refused = []
    for _ in range(60):  # 429s keep coming every few seconds: no step back up
        while_refused += run(learned, clock, 3)
        learned.refused(1.0)
    assert max(while_refused) == 25
    limits = run(learned, clock, 60)  # then they stop
    assert limits[-1] == 100
    back = limits.index(100) + 1
    assert back <= 2 * learned_rates.RECOVER_STEP_SECONDS  # 25 -> 50 -> 100, 30 s not 40 min
    assert sorted(set(limits)) == [25, 50, 100]


def test_a_replica_cannot_push_a_rate_out_of_bounds_or_keep_it_under_the_floor() -> None:
    learned, clock, _ = appends()
    for rate in (math.nan, math.inf, -math.inf):
        learned.adopt(rate, slow_start=True)
        assert learned.limit == 100
    learned.adopt(10_000.0, slow_start=True)
    assert learned.limit == 600  # the ceiling
    learned.adopt(1.0, slow_start=False)
    assert learned.limit == 25  # a quarter of the floor at most
    burst(learned)  # our own calls of the same 429 episode: no second decrease
    assert learned.limit == 25
    limits = run(learned, clock, 60)
    assert limits[-1] == 100  # an adopted decrease recovers like our own


@given(
    st.lists(
        st.one_of(
            st.tuples(
                st.just("refused"),
                st.sampled_from([None, 0.0, 1.0, 30.0, 59.0, 3600.0, math.inf, math.nan]),
            ),
            st.tuples(st.just("saturated"), st.none()),
            st.tuples(st.just("wait"), st.integers(0, 45)),
        ),
        max_size=120,
    )
)
def test_decreases_are_one_per_epoch_and_the_floor_returns_within_a_minute(
    events: list[tuple[str, float | int | None]],
) -> None:
    learned, clock, _ = appends(floor=20)
    last_429 = -math.inf
    refused_at_floor: list[float] = []
    decreases: list[float] = []
    for kind, value in events:
        before = learned.rate
        if kind == "refused":
            at_floor = learned.rate <= learned.floor
            retry_after = None if value is None else float(value)
            learned.refused(retry_after)
            last_429 = clock.now
            if learned.rate < before:
                decreases.append(clock.now)
                if learned.rate < learned.floor:  # under the floor: refused at it before
                    assert any(clock.now - t >= EPOCH_SECONDS for t in refused_at_floor)
            if at_floor:
                refused_at_floor.append(clock.now)
        elif kind == "saturated":
            learned.saturated()
        else:
            for _ in range(int(value or 0)):
                clock.now += 1
                learned.tick()
                if clock.now - last_429 > 60:
                    assert learned.limit >= learned.floor
        assert 5 <= learned.limit <= 120
    assert all(b - a >= EPOCH_SECONDS for a, b in itertools.pairwise(decreases))


# -- Retry-After through the bot's own Slack client, against the fake Slack --------------------


@pytest.mark.parametrize(
    ("header", "seconds", "absurd"),
    [
        ("inf", 60.0, True),
        ("3600", 60.0, True),
        ("nan", 1.0, True),
        ("-5", 1.0, True),
        ("soon", 1.0, True),
        ("30", 30.0, False),
    ],
)
async def test_an_absurd_retry_after_is_capped_and_logged_once(
    fake_slack: FakeSlack,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    header: str,
    seconds: float,
    absurd: bool,
) -> None:
    fake_slack.limits[APPEND] = Limit(1, 60.0)
    fake_slack.retry_after[APPEND] = header
    budgets = WorkspaceBudgets(Limits())
    reported: list[tuple[str, float]] = []
    real = budgets.rate_limited

    def spy(method: str, wait: float) -> None:
        reported.append((method, wait))
        real(method, wait)

    monkeypatch.setattr(budgets, "rate_limited", spy)
    client = web_client(BOT_TOKEN, fake_slack.api_url, budgets)
    caplog.set_level(logging.WARNING, logger="bot.slack.ratelimit")
    try:
        for _ in range(3):  # one that passes, then two 429s (appends are not retried)
            with contextlib.suppress(SlackApiError):
                await client.api_call(
                    APPEND, json={"channel": "C1", "ts": "1.000000", "markdown_text": "hi"}
                )
        assert [c.status for c in fake_slack.calls_to(APPEND)][1:] == [429, 429]
        assert reported == [(APPEND, seconds), (APPEND, seconds)]
        paused = await budgets.appends.window.paused_for()
        assert paused <= seconds  # not for good
        assert paused > 0 or seconds < 30  # (a one-second pause may be over by now)
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        named = [w for w in warnings if APPEND in w and repr(header) in w]
        assert len(named) == (1 if absurd else 0)  # once, however many 429s carry it
    finally:
        await budgets.stop()
        assert client.session is not None
        await client.session.close()


async def test_a_retried_method_sleeps_a_garbage_retry_after_out_and_every_429_is_reported(
    fake_slack: FakeSlack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """slack_sdk's own sleep would `int()` the header and raise; the last attempt's 429 (no
    retry left) pauses the budget too."""
    budgets = WorkspaceBudgets(Limits())
    reported: list[tuple[str, float]] = []
    monkeypatch.setattr(budgets, "rate_limited", lambda m, s: reported.append((m, s)))
    client = web_client(BOT_TOKEN, fake_slack.api_url, budgets)
    args = {"channel": "C1", "ts": "1.000000", "text": "hi"}
    try:
        fake_slack.limits[UPDATE] = Limit(1, 0.5)
        fake_slack.retry_after[UPDATE] = "soon"
        for _ in range(2):  # the second is refused, sleeps 1-2 s and is retried: it passes
            with contextlib.suppress(SlackApiError):
                await client.api_call(UPDATE, json=args)
        assert [c.status for c in fake_slack.calls_to(UPDATE)][1] == 429
        assert fake_slack.calls_to(UPDATE)[-1].status != 429
        assert reported == [(UPDATE, 1.0)]

        fake_slack.limits[UPDATE] = Limit(1, 60.0)
        fake_slack.retry_after[UPDATE] = "0"
        reported.clear()
        with pytest.raises(SlackApiError):
            await client.api_call(UPDATE, json=args)  # refused, retried twice, refused
        assert reported == [(UPDATE, 0.0)] * 3
    finally:
        await budgets.stop()
        assert client.session is not None
        await client.session.close()
