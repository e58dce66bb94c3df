"""Refreshes are spread over a wave of replies, not spent at its start (issue 18).

Slack counts each method in a sliding minute. A budget that let half its minute through at once
spent it while the replies were a few words long and then refreshed each reply once in many
seconds; paced over what the window allows in the next seconds, every reply keeps moving to
its end, and Slack still refuses nothing."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from bot.coordination import LocalWindow
from tests.fakes.openai import FakeOpenAI, Played, Script
from tests.fakes.slack import FakeSlack, Limit
from tests.harness import RunningBot, make_settings, start_bot, stop_bot


def words(reply: int, count: int) -> str:
    return " ".join(f"r{reply}w{i}" for i in range(count))


@dataclass
class Group:
    """Replies asked for together, `after` seconds after the group before them."""

    texts: dict[str, str]
    first_token: float
    after: float = 0.0
    tokens_per_second: float = 40


async def wave(
    slack: FakeSlack,
    model: FakeOpenAI,
    sqlite_url: str,
    groups: list[Group],
    limits: dict[str, int],
    prepare: Callable[[RunningBot], None] | None = None,
    **settings: Any,
) -> dict[str, Played]:
    """Every group's replies asked for at once; Slack (the fake) allows `limits` a minute and
    refuses nothing; every reply ends exactly as written. The model's run of each reply."""
    for method, calls in limits.items():
        slack.limits[method] = Limit(calls, 60.0)
    texts = {channel: text for group in groups for channel, text in group.texts.items()}
    bot = await start_bot(make_settings(slack, model, sqlite_url, **settings))
    if prepare is not None:
        prepare(bot)
    try:
        for group in groups:
            for channel, text in group.texts.items():
                model.script_for(
                    f"question {channel}",
                    Script(
                        text=text,
                        time_to_first_token=group.first_token,
                        tokens_per_second=group.tokens_per_second,
                    ),
                )
        for group in groups:
            await asyncio.sleep(group.after)
            await asyncio.gather(*[bot.mention(c, f"question {c}", slack) for c in group.texts])
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
        [Group(texts, 0.2)],
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
        [Group(texts, 2.3)],
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


@pytest.mark.parametrize(("first_token", "posting"), [(3.0, 0.0), (2.4, 1.0)])
async def test_a_thinking_placeholder_gets_its_words_when_later_replies_take_the_spare(
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    sqlite_url: str,
    first_token: float,
    posting: float,
) -> None:
    """Ten edits a minute (one of them headroom for replies about to start), one stream
    start (taken by the first reply). A reply sent as edits whose model answers after its 2 s
    grace posts "Thinking…" while the budget can spare the edit that replaces it; eight
    replies open after it, and their finals' reserve takes that spare. It was promised: its
    words come out of the headroom as soon as the model sends them, not with its final (at
    60 replies, "Thinking…" stood for 10-18 s). Also when the words come while "Thinking…"
    is being posted (`posting` s: it takes Slack that long to answer)."""
    fake_slack.delays_for[("chat.postMessage", "_Thinking…_")] = posting
    slow = {"CSLOW": words(9, 80)}
    later = {f"C{i}": words(i, 120) for i in range(1, 9)}
    runs = await wave(
        fake_slack,
        fake_model,
        sqlite_url,
        [
            Group({"C0": words(0, 40)}, 0.1),
            Group(slow, first_token, after=0.3, tokens_per_second=20),
            Group(later, 0.1, after=2.3),
        ],
        {"chat.startStream": 1, "chat.stopStream": 1, "chat.update": 10},
        streaming="auto",
        slack_stream_starts_per_minute=1,
        slack_edit_budget_per_minute=10,
    )
    played = runs["CSLOW"]
    assert played.first_token_at is not None
    assert played.last_token_at is not None
    (reply,) = fake_slack.bot_messages("CSLOW")
    shown = fake_slack.timeline[reply.ts]
    assert shown[0][1] == "_Thinking…_"
    words_at = next(at for at, t in shown if t.startswith("r9"))
    assert words_at - played.first_token_at < 1.5
    assert played.last_token_at - words_at > 2.0, "words long before the final"


async def test_a_slow_journal_does_not_hold_a_reply_still(
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    sqlite_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every new message is recorded in the live-reply journal (a database insert), which
    took 5-10 s while sixty turns wrote to the database at once. A reply sent as edits went
    on only once its first message was recorded, its text standing still meanwhile; now the
    record is written beside it, and still before the row is deleted at the end."""
    journal_log: list[tuple[str, str]] = []

    def slow_journal(bot: RunningBot) -> None:
        journal = bot.countersign.live_replies
        opened, closed = journal.opened, journal.closed

        async def slow_opened(channel: str, ts: str) -> None:
            await asyncio.sleep(4.0)
            await opened(channel, ts)
            journal_log.append(("opened", ts))

        async def logged_closed(ts: str) -> None:
            journal_log.append(("closed", ts))
            await closed(ts)

        monkeypatch.setattr(journal, "opened", slow_opened)
        monkeypatch.setattr(journal, "closed", logged_closed)

    runs = await wave(
        fake_slack,
        fake_model,
        sqlite_url,
        [
            Group({"C0": words(0, 40)}, 0.1),
            Group({"C1": words(1, 120)}, 0.1, after=0.3, tokens_per_second=20),
        ],
        {"chat.startStream": 1, "chat.stopStream": 1},
        prepare=slow_journal,
        streaming="auto",
        slack_stream_starts_per_minute=1,
    )
    played = runs["C1"]
    assert played.first_token_at is not None
    assert played.last_token_at is not None
    (reply,) = fake_slack.bot_messages("C1")
    moments = [at for at, t in fake_slack.timeline[reply.ts] if at <= played.last_token_at]
    gaps = [b - a for a, b in itertools.pairwise([*moments, played.last_token_at])]
    assert max(gaps) < 2.5, f"text stood still for {max(gaps):.1f} s"
    for ts in (reply.ts, *(m.ts for m in fake_slack.streamed_messages("C0"))):
        assert journal_log.index(("opened", ts)) < journal_log.index(("closed", ts))


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
