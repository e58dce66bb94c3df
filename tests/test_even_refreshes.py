"""Refreshes are spread over a wave of replies, not spent at its start (issue 18).

Slack counts each method in a sliding minute. A budget that let half its minute through at once
spent it while the replies were a few words long and then refreshed each reply once in many
seconds; paced over what the window allows in the next seconds, every reply keeps moving to
its end, and Slack still refuses nothing."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from bot.coordination import LocalWindow
from tests.fakes.openai import FakeOpenAI, Played, Script
from tests.fakes.slack import FakeSlack, Limit
from tests.harness import make_settings, start_bot, stop_bot


def words(reply: int, count: int) -> str:
    return " ".join(f"r{reply}w{i}" for i in range(count))


async def wave(
    slack: FakeSlack,
    model: FakeOpenAI,
    sqlite_url: str,
    texts: dict[str, str],
    first_token: float,
    limits: dict[str, int],
    **settings: Any,
) -> dict[str, Played]:
    """Every reply asked for at once; Slack (the fake) allows `limits` a minute and refuses
    nothing; every reply ends exactly as written. The model's run of each reply."""
    for method, calls in limits.items():
        slack.limits[method] = Limit(calls, 60.0)
    bot = await start_bot(make_settings(slack, model, sqlite_url, **settings))
    try:
        for channel, text in texts.items():
            model.script_for(
                f"question {channel}",
                Script(text=text, time_to_first_token=first_token, tokens_per_second=40),
            )
        await asyncio.gather(*[bot.mention(c, f"question {c}", slack) for c in texts])
        await bot.idle(timeout=60)
    finally:
        await stop_bot(bot)
    assert all(c.status != 429 for c in slack.calls)
    played = {p.text: p for p in model.played}
    for channel, text in texts.items():
        (reply,) = slack.bot_messages(channel)
        assert reply.text == text
    return {channel: played[text] for channel, text in texts.items()}


async def test_native_replies_keep_moving_to_the_end_of_a_wave(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    """Slack allows 40 appends a minute, four replies stream for 6 s each. Spent at once,
    half the minute (20 appends) was gone in 2.5 s and each reply then waited about 6 s for
    its next refresh; paced, no reply's text stands still for more than 2.5 s while the model
    writes, and every reply shows its first words at once."""
    texts = {f"C{i}": words(i, 240) for i in range(4)}
    runs = await wave(
        fake_slack,
        fake_model,
        sqlite_url,
        texts,
        0.2,
        {"chat.appendStream": 40},
        streaming="native",
        slack_append_budget_per_minute=40,
    )
    for channel, played in runs.items():
        (reply,) = fake_slack.streamed_messages(channel)
        assert played.first_token_at is not None
        assert played.last_token_at is not None
        shown = [at for at, t in fake_slack.timeline[reply.ts] if t]
        assert shown[0] - played.first_token_at < 1.0, "first words at once"
        moments = [played.first_token_at, *shown]
        streaming = [at for at in moments if at <= played.last_token_at] + [played.last_token_at]
        gaps = [b - a for a, b in itertools.pairwise(streaming)]
        assert max(gaps) < 2.5, f"{channel}: text stood still for {max(gaps):.1f} s"


async def test_a_slow_first_token_does_not_leave_replies_on_thinking_until_their_final(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    """One stream start and 6 edits a minute, five replies sent as edits, the model's first
    token after 2.3 s (past the 2 s grace). Each "Thinking…" is owed an edit that the finals'
    reserve leaves room for only once: the other replies wait for their first words instead
    of sitting on "Thinking…" until their final, and every reply shows words within 3 s of
    its first token."""
    texts = {f"C{i}": words(i, 160) for i in range(6)}
    runs = await wave(
        fake_slack,
        fake_model,
        sqlite_url,
        texts,
        2.3,
        {"chat.startStream": 1, "chat.stopStream": 1, "chat.update": 6},
        streaming="auto",
        slack_stream_starts_per_minute=1,
        slack_edit_budget_per_minute=6,
    )
    for channel, played in runs.items():
        (reply,) = fake_slack.bot_messages(channel)
        assert played.first_token_at is not None
        words_at = next(at for at, t in fake_slack.timeline[reply.ts] if t.startswith("r"))
        assert words_at - played.first_token_at < 3.0, channel


async def test_a_window_tells_what_will_be_free_within_some_seconds() -> None:
    now = [100.0]
    window = LocalWindow(5, 10.0, lambda: now[0])
    for at in (100.0, 102.0, 104.0):
        now[0] = at
        assert (await window.take(keep_free=0))[0]
    now[0] = 105.0
    assert await window.free() == 2
    assert await window.free(within=5.0) == 3  # the call at 100 has left by 115
    assert await window.free(within=7.5) == 4  # and the one at 102
    assert await window.free(within=20.0) == 5
