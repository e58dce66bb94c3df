"""Native streaming through the front door: chat.startStream / appendStream / stopStream
against the fake Slack's rules, the switch to edits when Tier 2 is spent, and a stream that
dies mid-reply finished by chat.update."""

from __future__ import annotations

import itertools
import time

from bot.slack import cards
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import TEAM_ID, FakeSlack, Limit, wait_until
from tests.harness import RunningBot, make_settings, start_bot, stop_bot
from tests.test_approvals_flow import CREATE, call

WORDS = " ".join(f"word{i}" for i in range(80)) + "."


async def test_a_mention_streams_natively_to_the_exact_text(
    native_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Script(text=WORDS, time_to_first_token=0.05, tokens_per_second=40))
    ts = await native_bot.mention("C1", "eighty words please", fake_slack)
    await native_bot.idle()

    (reply,) = fake_slack.streamed_messages("C1")
    assert reply.thread_ts == ts
    assert reply.text == WORDS
    assert fake_slack.calls_to("chat.update") == []
    assert fake_slack.calls_to("chat.postMessage") == []
    (start,) = fake_slack.calls_to("chat.startStream")
    assert start.args["recipient_user_id"] == "UALICE"
    assert start.args["recipient_team_id"] == TEAM_ID
    appends = fake_slack.calls_to("chat.appendStream")
    assert len(appends) >= 3, "the text arrived in several appends"
    assert all(c.ok for c in appends)
    shown = fake_slack.history[reply.ts]
    for earlier, later in itertools.pairwise(shown):
        assert later.startswith(earlier)
    (stop,) = fake_slack.calls_to("chat.stopStream")
    assert stop.ok
    assert not fake_slack.streams[reply.ts].open


async def test_model_mentions_stay_inert_in_a_native_stream(
    native_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Script(text="Hey <!channel> and <@UBOB>, a & b.", tokens_per_second=200))
    await native_bot.mention("C1", "ping everyone", fake_slack)
    await native_bot.idle()

    (reply,) = fake_slack.streamed_messages("C1")
    assert reply.text == "Hey &lt;!channel&gt; and &lt;@UBOB&gt;, a &amp; b."
    sent = "".join(
        str(c.args.get("markdown_text") or "")
        + "".join(str(k.get("text", "")) for k in c.args.get("chunks") or [])
        for c in fake_slack.calls
        if c.method.startswith("chat.")
    )
    assert "<!" not in sent
    assert "<@" not in sent


async def test_auto_uses_edits_when_stream_starts_are_spent(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    """Two starts a minute: the first two replies stream natively, the third is sent as
    edits, and Slack never answers 429."""
    fake_slack.limits["chat.startStream"] = Limit(2, 60.0)
    fake_slack.limits["chat.stopStream"] = Limit(2, 60.0)
    bot = await start_bot(
        make_settings(
            fake_slack, fake_model, sqlite_url, streaming="auto", slack_stream_starts_per_minute=2
        )
    )
    try:
        texts = {f"C{i}": f"answer number {i} " + WORDS for i in range(3)}
        for channel, text in texts.items():
            fake_model.script_for(f"question {channel}", Script(text=text, tokens_per_second=80))
        for channel in texts:
            await bot.mention(channel, f"question {channel}", fake_slack)
        await bot.idle()
    finally:
        await stop_bot(bot)

    streamed = [c for c in texts if fake_slack.streamed_messages(c)]
    edited = [c for c in texts if not fake_slack.streamed_messages(c)]
    assert len(streamed) == 2
    assert len(edited) == 1
    for channel, text in texts.items():
        (reply,) = fake_slack.bot_messages(channel)
        assert reply.text == text
    assert all(c.status != 429 for c in fake_slack.calls)


async def test_a_stream_that_dies_mid_reply_is_finished_by_edits(
    native_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_slack.stream_lifetime = 0.8  # Slack ends streams after ~5 minutes; here sooner
    fake_model.script(Script(text=WORDS, time_to_first_token=0.05, tokens_per_second=40))
    await native_bot.mention("C1", "a long one", fake_slack)
    await native_bot.idle()

    (reply,) = fake_slack.bot_messages("C1")
    assert reply.ts in fake_slack.streams
    assert reply.text == WORDS
    refused = [c for c in fake_slack.calls if c.args.get("ts") == reply.ts and not c.ok]
    assert [c.method for c in refused] == ["chat.appendStream"]
    assert fake_slack.calls_to("chat.update"), "the rest came by chat.update"
    for earlier, later in itertools.pairwise(fake_slack.history[reply.ts]):
        # Never a word twice, never a word lost: every text shown extends the one before.
        assert later.removesuffix(" ▍").startswith(earlier.removesuffix(" ▍"))


async def test_a_refused_stream_start_falls_back_to_edits(
    native_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_slack.fail_methods["chat.startStream"] = "not_allowed_token_type"
    fake_model.script(Script(text=WORDS, tokens_per_second=200))
    await native_bot.mention("C1", "hello", fake_slack)
    await native_bot.idle()

    (reply,) = fake_slack.bot_messages("C1")
    assert reply.text == WORDS
    assert fake_slack.history[reply.ts][0].startswith("word0")  # its first post has words
    assert native_bot.countersign.budgets is not None
    assert native_bot.countersign.budgets.streams.open_streams == 0


async def test_a_reply_longer_than_one_stream_continues_in_new_messages(
    native_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    # ~16,800 characters in 1,400 tokens: within the reply's length limit (REPLY_TOKENS).
    long_text = " ".join(f"word{i:07d}" for i in range(1400)) + "."
    fake_model.script(Script(text=long_text, tokens_per_second=4000))
    await native_bot.mention("C1", "very long", fake_slack)
    await native_bot.idle(timeout=60)

    messages = fake_slack.bot_messages("C1")
    assert len(messages) >= 2
    assert messages[0].ts in fake_slack.streams
    assert not fake_slack.streams[messages[0].ts].open
    assert " ".join(m.text.strip() for m in messages) == long_text


async def test_read_tools_show_as_tasks_in_the_stream(
    native_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(
        Script(
            tool_calls=[call("list_tasks", {}, "call_list"), call("get_task", {"task_id": 999})]
        ),
        Script(text="There are no tasks yet."),
    )
    await native_bot.mention("C1", "what is on the board?", fake_slack)
    await native_bot.idle()

    (reply,) = fake_slack.streamed_messages("C1")
    assert reply.text == "There are no tasks yet."
    tasks = fake_slack.streams[reply.ts].tasks
    assert tasks["call_list"]["title"] == "Looking up tasks"
    assert tasks["call_list"]["status"] == "complete"
    assert tasks["call_1"]["status"] == "error"  # task 999 does not exist
    assert "999" in tasks["call_1"]["details"]
    statuses = [
        chunk["status"]
        for c in fake_slack.calls
        if c.method in ("chat.appendStream", "chat.stopStream")  # the stop carries the last
        for chunk in c.args.get("chunks") or []
        if chunk.get("type") == "task_update" and chunk["id"] == "call_list"
    ]
    assert statuses[-1] == "complete"


def session_statuses(slack: FakeSlack, thread_ts: str) -> list[str]:
    return [str(s["status"]) for s in slack.session_statuses if s.get("thread_ts") == thread_ts]


async def test_the_thread_shows_processing_then_suspended_then_active(
    native_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Script(tool_calls=[call("create_task", CREATE)]), Script(text="Created."))
    ts = await native_bot.mention("C1", "make a task", fake_slack)
    await native_bot.idle()
    assert session_statuses(fake_slack, ts) == ["processing", "suspended"]
    assert fake_slack.session_statuses[0]["initiator_user_id"] == "UALICE"

    (card,) = fake_slack.cards("C1")
    assert await native_bot.click(card, cards.APPROVE, "UALICE", "C1") == 200
    await wait_until(lambda: session_statuses(fake_slack, ts)[-1:] == ["active"], timeout=15)
    assert session_statuses(fake_slack, ts) == ["processing", "suspended", "processing", "active"]
    assert fake_slack.assistant_statuses == []


async def test_without_agent_sessions_the_assistant_status_is_used(
    native_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_slack.agent_sessions = False
    fake_model.script(Script(text="One."), Script(text="Two."))
    ts = await native_bot.mention("C1", "first", fake_slack)
    await native_bot.idle()
    await native_bot.mention("C1", "second", fake_slack, thread_ts=ts)
    await native_bot.idle()

    # Asked once, refused once, never again: the older surface takes over.
    assert len(fake_slack.calls_to("agents.sessions.setStatus")) == 1
    assert [s["status"] for s in fake_slack.assistant_statuses] == [
        "is working on it…",
        "",
        "is working on it…",
        "",
    ]
    assert [m.text for m in fake_slack.streamed_messages("C1")] == ["One.", "Two."]


async def test_a_429_on_appends_pauses_appends_only_and_the_reply_still_lands(
    native_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """Slack allows fewer appends than configured: it answers 429, appends wait out
    Retry-After, nothing else is refused, and the text lands exactly."""
    fake_slack.limits["chat.appendStream"] = Limit(2, 2.0)
    fake_model.script(Script(text=WORDS, time_to_first_token=0.05, tokens_per_second=40))
    await native_bot.mention("C1", "eighty words", fake_slack)
    await native_bot.idle(timeout=60)

    (reply,) = fake_slack.streamed_messages("C1")
    assert reply.text == WORDS
    limited = {c.method for c in fake_slack.calls if c.status == 429}
    assert limited == {"chat.appendStream"}
    assert not fake_slack.streams[reply.ts].open


def final_shown_at(slack: FakeSlack, channel: str, text: str) -> float | None:
    """When the reply's messages, read in order, first showed exactly `text`."""
    messages = slack.bot_messages(channel)
    moments = sorted({at for m in messages for at, _ in slack.timeline[m.ts]})
    for moment in moments:
        shown = []
        for message in messages:
            seen = [t for at, t in slack.timeline[message.ts] if at <= moment]
            shown.append(seen[-1] if seen else "")
        if "\n".join(s for s in shown if s).replace("\n", " ").split() == text.split():
            return moment
    return None


async def test_the_final_text_never_waits_behind_appends(
    native_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """Slack allows far fewer appends than the bot starts with (3 a minute: a 429 with a
    Retry-After of up to a minute): the last words still reach the reader within 2 s of the
    model's last token, exactly as written, because the close does not queue behind appends."""
    fake_slack.limits["chat.appendStream"] = Limit(3, 60.0)
    fake_model.script(Script(text=WORDS, time_to_first_token=0.05, tokens_per_second=40))
    started = time.monotonic()
    await native_bot.mention("C1", "eighty words", fake_slack)
    await native_bot.idle(timeout=90)
    (played,) = fake_model.played
    assert played.last_token_at is not None
    shown = final_shown_at(fake_slack, "C1", WORDS)
    assert shown is not None, [m.text for m in fake_slack.bot_messages("C1")]
    assert shown - played.last_token_at < 2.0
    assert time.monotonic() - started < 30  # nothing sat out a minute's Retry-After
    assert {c.method for c in fake_slack.calls if c.status == 429} <= {"chat.appendStream"}
    assert not any(s.open for s in fake_slack.streams.values())


async def test_a_stream_that_cannot_be_stopped_in_time_finishes_in_a_new_message(
    native_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """Slack allows one stop a minute (the bot starts from 20): the second reply's stop is
    refused with a 429. Its last words do not wait for the minute: they go on in an ordinary
    message within 2 s of the model's last token, and the two messages read exactly as
    written (the stream keeps what it showed; nothing is shown twice)."""
    fake_slack.limits["chat.stopStream"] = Limit(1, 60.0)
    fake_model.script(Script(text="First answer, short."))
    root = await native_bot.mention("C1", "first", fake_slack)
    await native_bot.idle()
    fake_model.script(Script(text=WORDS, time_to_first_token=0.05, tokens_per_second=40))
    await native_bot.mention("C2", "second", fake_slack)
    await wait_until(
        lambda: len(fake_model.played) == 2 and bool(fake_model.played[1].last_token_at), 30
    )
    played = fake_model.played[1]
    assert played.last_token_at is not None
    await wait_until(lambda: final_shown_at(fake_slack, "C2", WORDS) is not None, 10)
    shown = final_shown_at(fake_slack, "C2", WORDS)
    assert shown is not None
    assert shown - played.last_token_at < 2.0
    streamed, continued = fake_slack.bot_messages("C2")
    assert streamed.ts in fake_slack.streams
    assert (streamed.text + " " + continued.text).split() == WORDS.split()
    assert [c.method for c in fake_slack.calls if c.status == 429] == ["chat.stopStream"]
    assert root


async def test_replies_without_a_stream_start_show_their_first_words_with_their_first_post(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    """One stream start a minute: the other replies fall back to edits. Their first post
    carries the model's first words (no "Thinking…" that only a scarce chat.update could
    replace), within 3 s of the first token, and each reply still ends exactly as written."""
    fake_slack.limits["chat.startStream"] = Limit(1, 60.0)
    fake_slack.limits["chat.stopStream"] = Limit(1, 60.0)
    fake_slack.limits["chat.update"] = Limit(6, 60.0)  # edits are scarce
    bot = await start_bot(
        make_settings(
            fake_slack,
            fake_model,
            sqlite_url,
            streaming="auto",
            slack_stream_starts_per_minute=1,
            slack_edit_budget_per_minute=6,
        )
    )
    texts = {f"C{i}": f"answer number {i} " + WORDS for i in range(4)}
    try:
        for channel, text in texts.items():
            fake_model.script_for(
                f"question {channel}",
                Script(text=text, time_to_first_token=0.3, tokens_per_second=40),
            )
        for channel in texts:
            await bot.mention(channel, f"question {channel}", fake_slack)
        await bot.idle(timeout=90)
    finally:
        await stop_bot(bot)
    fell_back = [c for c in texts if not fake_slack.streamed_messages(c)]
    assert len(fell_back) == 3
    for channel in fell_back:
        (played,) = [p for p in fake_model.played if p.text == texts[channel]]
        assert played.first_token_at is not None
        (reply,) = fake_slack.bot_messages(channel)
        first_at, first_text = fake_slack.timeline[reply.ts][0]
        assert first_text.startswith(f"answer number {channel[1:]}")  # words, not Thinking…
        assert first_at - played.first_token_at < 3.0
        assert reply.text == texts[channel]
    assert all(c.status != 429 for c in fake_slack.calls)
