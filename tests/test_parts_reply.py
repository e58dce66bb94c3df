"""Replies "in parts" (bot/slack/parts_reply.py) through the front door: when no stream start
is free and the chat.update budget cannot promise another final edit, a reply is posted as
ordinary messages that are never edited; with room, replies stream natively or by edits."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from bot.config import Settings
from bot.db.models import LiveReply
from bot.slack.native_reply import CURSOR
from bot.slack.part_cuts import part_cut
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import Bucket, FakeSlack, Limit, wait_until
from tests.harness import make_settings, start_bot, stop_bot
from tests.test_feedback import give, stored
from tests.test_stop import LONG, press_stop

WORDS = " ".join(f"word{i}" for i in range(200)) + "."


def scarce(slack: FakeSlack, model: FakeOpenAI, sqlite_url: str, updates: int) -> Settings:
    """Settings of a bot told Slack's floors, `updates` edits and one stream start a minute,
    against a fake Slack that enforces them."""
    floors(slack, updates)
    return make_settings(
        slack,
        model,
        sqlite_url,
        streaming="auto",
        slack_stream_starts_per_minute=1,
        slack_edit_budget_per_minute=updates,
    )


def floors(slack: FakeSlack, updates: int) -> None:
    """Slack's documented floors, with `updates` chat.update a minute and one stream start."""
    slack.limits["chat.postMessage"] = Bucket(3, 1.0, per_channel=True)  # 1/s, short bursts
    slack.limits["chat.update"] = Limit(updates, 60.0)
    slack.limits["chat.startStream"] = Limit(1, 60.0)
    slack.limits["chat.stopStream"] = Limit(1, 60.0)
    slack.limits["chat.appendStream"] = Limit(100, 60.0)


async def test_a_reply_goes_in_parts_when_the_edit_budget_cannot_promise_its_final(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    """Two edits a minute and one stream start: of four replies at once one streams, two are
    sent as edits (a final edit each fills the budget) and the fourth goes in parts: never
    edited, its first part at a word boundary while the model still writes, its final part
    (with the feedback buttons) the first call in its channel after the model's last token,
    the parts read in order the exact text, and Slack never answers 429."""
    bot = await start_bot(scarce(fake_slack, fake_model, sqlite_url, updates=2))
    texts = {f"C{i}": f"answer number {i} " + WORDS for i in range(4)}
    try:
        for channel, text in texts.items():
            fake_model.script_for(
                f"question {channel}",
                Script(text=text, time_to_first_token=0.1, tokens_per_second=40),
            )
        for channel in texts:
            await bot.mention(channel, f"question {channel}", fake_slack)
        await bot.idle(timeout=60)

        in_parts = [c for c in texts if len(fake_slack.bot_messages(c)) > 1]
        assert len(in_parts) == 1
        (channel,) = in_parts
        parts = fake_slack.bot_messages(channel)
        assert all(m.ts not in fake_slack.streams and m.edits == 0 for m in parts)
        assert not [c for c in fake_slack.calls_to("chat.update") if c.args["channel"] == channel]
        assert " ".join(m.text for m in parts).split() == texts[channel].split()
        words = set(texts[channel].split())
        assert all(w in words for m in parts for w in m.text.split()), "no part ends mid-word"
        assert "▍" not in parts[0].text
        assert "Thinking" not in parts[0].text

        (played,) = [p for p in fake_model.played if p.text == texts[channel]]
        assert played.last_token_at is not None
        posts = [c for c in fake_slack.calls_to("chat.postMessage") if c.args["channel"] == channel]
        assert posts[0].at < played.last_token_at, "the first part came while the model wrote"
        after = [c for c in fake_slack.calls if c.at > played.last_token_at]
        mine = [c for c in after if c.args.get("channel") == channel]
        assert [c.method for c in mine] == ["chat.postMessage"], "the final part, at once"

        assert fake_slack.feedback_buttons(parts[-1].ts) is not None
        assert all(fake_slack.feedback_buttons(m.ts) is None for m in parts[:-1])
        assert await give(bot, channel, parts[-1].ts, "UALICE", "good") == 200
        await bot.idle()
        assert (parts[-1].ts, "UALICE", "good") in await stored(bot)

        for other in texts:
            if other != channel:
                (reply,) = fake_slack.bot_messages(other)
                assert reply.text == texts[other]
        assert all(c.status != 429 for c in fake_slack.calls)
    finally:
        await stop_bot(bot)


async def test_with_room_for_edits_no_reply_goes_in_parts(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    """Fifty edits a minute and one stream start: six replies at once stream or go as edits,
    one message each."""
    floors(fake_slack, updates=50)
    bot = await start_bot(
        make_settings(
            fake_slack, fake_model, sqlite_url, streaming="auto", slack_stream_starts_per_minute=1
        )
    )
    texts = {f"C{i}": f"answer number {i} " + WORDS[:300] for i in range(6)}
    try:
        for channel, text in texts.items():
            fake_model.script_for(f"question {channel}", Script(text=text, tokens_per_second=80))
        for channel in texts:
            await bot.mention(channel, f"question {channel}", fake_slack)
        await bot.idle(timeout=60)
    finally:
        await stop_bot(bot)
    for channel, text in texts.items():
        (reply,) = fake_slack.bot_messages(channel)
        assert reply.text.split() == text.split()
    assert len(fake_slack.calls_to("chat.update")) >= 5
    assert all(c.status != 429 for c in fake_slack.calls)


async def test_a_stopped_reply_in_parts_ends_with_the_note_and_leaves_no_journal_rows(
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    sqlite_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One edit and one stream start a minute, both taken: a long reply goes in parts and is
    stopped after its first part. Its last part (posted, never an edit) carries the rest said
    so far and who stopped it, without feedback buttons. Each part was journaled with the
    cursor while it was the newest (so recovery after a crash would mark it interrupted), the
    earlier one closed once a later one was posted, and no row is left."""
    bot = await start_bot(scarce(fake_slack, fake_model, sqlite_url, updates=1))
    journal_log: list[tuple[str, str, str]] = []
    journal = bot.countersign.live_replies
    assert journal is not None
    opened, shown, closed = journal.opened, journal.shown, journal.closed

    async def logged_opened(channel: str, ts: str) -> None:
        journal_log.append(("opened", ts, ""))
        await opened(channel, ts)

    def logged_shown(ts: str, text: str) -> None:
        journal_log.append(("shown", ts, text))
        shown(ts, text)

    async def logged_closed(ts: str) -> None:
        journal_log.append(("closed", ts, ""))
        await closed(ts)

    monkeypatch.setattr(journal, "opened", logged_opened)
    monkeypatch.setattr(journal, "shown", logged_shown)
    monkeypatch.setattr(journal, "closed", logged_closed)
    try:
        for channel in ("C8", "C9"):  # the stream start, then the edit
            fake_model.script_for(f"question {channel}", Script(text=WORDS, tokens_per_second=40))
            await bot.mention(channel, f"question {channel}", fake_slack)
            await wait_until(lambda c=channel: bool(fake_slack.bot_messages(c)), timeout=10)
        fake_model.script_for("write a long essay", Script(text=LONG, tokens_per_second=40))
        root = await bot.mention("C1", "write a long essay", fake_slack)
        await wait_until(lambda: len(fake_slack.bot_messages("C1")) >= 1, timeout=10)
        first = fake_slack.bot_messages("C1")[0]
        await press_stop(bot, fake_slack, root, "UALICE")
        await bot.idle(timeout=60)
        await wait_until(lambda: ("closed", first.ts, "") in journal_log, timeout=10)
        async with bot.countersign.db.transaction() as session:
            left = (await session.scalars(select(LiveReply))).all()
    finally:
        await stop_bot(bot)

    parts = fake_slack.bot_messages("C1")
    assert len(parts) >= 2
    assert all(m.edits == 0 and m.ts not in fake_slack.streams for m in parts)
    body, note = " ".join(m.text for m in parts).rsplit("\n\n", 1)
    assert note == ":octagonal_sign: _Stopped by <@UALICE>._"
    assert LONG.split()[: len(body.split())] == body.split()
    assert len(body.split()) < len(LONG.split())
    assert all(fake_slack.feedback_buttons(m.ts) is None for m in parts)

    assert ("shown", first.ts, first.text + CURSOR) in journal_log
    mine = {m.ts for m in parts}
    journaled = [ts for kind, ts, _ in journal_log if kind == "opened" and ts in mine]
    assert journaled[: len(parts) - 1] == [m.ts for m in parts[:-1]]
    assert parts[-1].ts not in journaled, "the final part is complete when posted"
    for ts in journaled:
        assert journal_log.index(("opened", ts, "")) < journal_log.index(("closed", ts, ""))
    assert left == []


def test_a_part_ends_at_a_clean_boundary_and_leaves_a_word_for_the_final() -> None:
    sentence = "The first sentence is quite long enough to be posted on its own. Then more"
    assert part_cut(sentence, first=True, ripe=False, limit=3500) == sentence.index(" Then")
    assert part_cut("Short. Then mo", first=True, ripe=False, limit=3500) is None
    assert part_cut("a few words and a partial wo", first=True, ripe=True, limit=3500) == len(
        "a few words and a partial"
    )
    assert part_cut("oneword", first=True, ripe=True, limit=3500) is None
    assert part_cut("ends with a space ", first=True, ripe=True, limit=3500) == len("ends with a")
    code = "Look:\n```\nx = 1\ny = 2\n"
    cut = part_cut(code, first=True, ripe=True, limit=3500)
    assert cut is not None
    assert code[:cut].count("```") % 2 == 0, "never inside a code block"
    assert part_cut("some *bold words here", first=True, ripe=True, limit=3500) == len("some")
    paragraph = "x " * 400 + "\n\nnext"
    assert part_cut(paragraph, first=False, ripe=False, limit=3500) is None
    assert part_cut(paragraph, first=False, ripe=True, limit=3500) == len("x " * 400)


async def test_a_first_part_gives_way_to_the_finals_when_posts_are_scarce(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    """The workspace's chat.postMessage minute has one slot left: a reply in parts owes its
    final that slot, so its first part is not posted (the words wait) and the whole reply goes
    in its final part, right after the model's last token, without a 429."""
    bot = await start_bot(scarce(fake_slack, fake_model, sqlite_url, updates=1))
    try:
        budgets = bot.countersign.budgets
        assert budgets is not None
        # The minute's stream start and edit are spent: the next reply goes in parts.
        assert (await budgets.streams.starts.take(keep_free=0))[0]
        assert (await budgets.edits.window.take(keep_free=0))[0]
        [(_, posts)] = budgets.calls.windows_of("chat.postMessage", None)
        while await posts.free() > 1:
            assert (await posts.take(keep_free=0))[0]
        text = "answer number 1 " + WORDS
        fake_model.script(Script(text=text, time_to_first_token=0.1, tokens_per_second=40))
        await bot.mention("C1", "question", fake_slack)
        await bot.idle(timeout=60)

        (reply,) = fake_slack.bot_messages("C1")
        assert reply.text.split() == text.split()
        (played,) = [p for p in fake_model.played if p.text == text]
        assert played.last_token_at is not None
        (post,) = fake_slack.calls_to("chat.postMessage")
        assert post.at > played.last_token_at, "the words waited for the final part"
        assert [c for c in fake_slack.calls if c.status == 429] == []
        # The first part was tried again every 0.25 s, not at each of the 200 tokens (each
        # try asks the shared windows: Redis, on replicas).
        assert played.first_token_at is not None
        streamed = played.last_token_at - played.first_token_at
        assert budgets.calls.skipped["chat.postMessage"] <= 4 * streamed + 2
    finally:
        await stop_bot(bot)
