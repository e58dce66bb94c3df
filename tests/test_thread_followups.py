"""Threads continue: once the bot answered in a channel thread, later messages there go on with
the conversation without a mention (`THREAD_FOLLOWUPS=on`, the default), except those addressed
to someone else, which stay context; `THREAD_FOLLOWUPS=mention` keeps answering only mentions.
Attacked with the deliveries that must not start a turn: the bot's own and other bots'
messages, edits and deletions, threads the bot is not in, retries, and mentions of others."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from bot.db.models import Message
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import BOT_USER_ID, FakeSlack
from tests.harness import RunningBot, clean_env, make_settings, run_cli, start_bot, stop_bot


@pytest.fixture
async def mention_bot(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> AsyncIterator[RunningBot]:
    """A bot with THREAD_FOLLOWUPS=mention."""
    running = await start_bot(
        make_settings(fake_slack, fake_model, sqlite_url, thread_followups="mention")
    )
    yield running
    await stop_bot(running)


async def stored_texts(bot: RunningBot) -> list[str | None]:
    async with bot.countersign.db.transaction() as session:
        return list((await session.scalars(select(Message.content).order_by(Message.id))).all())


async def answered_thread(bot: RunningBot, fake_slack: FakeSlack) -> str:
    """Alice asks the bot in #C1; it answers in the thread. Returns the thread's ts."""
    root = await bot.mention("C1", "what broke last night?", fake_slack)
    await bot.idle()
    assert [m.text for m in fake_slack.bot_messages("C1")] == ["First answer."]
    return root


def bot_texts(fake_slack: FakeSlack) -> list[str]:
    return [m.text for m in fake_slack.bot_messages("C1")]


async def test_a_reply_in_the_thread_continues_without_a_mention(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Script(text="First answer."), Script(text="Second answer."))
    root = await answered_thread(bot, fake_slack)
    await bot.say(fake_slack, "C1", "and who fixed it?", user="UBOB", thread_ts=root)
    await bot.idle()
    assert bot_texts(fake_slack) == ["First answer.", "Second answer."]
    assert all(m.thread_ts == root for m in fake_slack.bot_messages("C1"))
    sent = fake_model.requests[-1].body["messages"]
    assert sent[-2]["content"] == "First answer."
    assert sent[-1] == {"role": "user", "content": "and who fixed it?", "name": "UBOB"}


@pytest.mark.parametrize(
    "addressed",
    [
        "<@UCAROL> can you take this one?",  # starts with another person's mention
        "thanks <@UCAROL|carol>, that helps",  # mentions someone else, not the bot
        "<@W0ENTERPRISE> over to you",  # an Enterprise Grid user id
        "<!here> the deploy is back",  # the channel
        "<!channel> heads up",
        "<!subteam^S0DEVS|@devs> please review",  # a user group
    ],
)
async def test_a_reply_addressed_to_someone_else_is_context_not_answered(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI, addressed: str
) -> None:
    fake_model.script(Script(text="First answer."), Script(text="Second answer."))
    root = await answered_thread(bot, fake_slack)
    await bot.say(fake_slack, "C1", addressed, user="UBOB", thread_ts=root)
    await bot.idle()
    assert bot_texts(fake_slack) == ["First answer."]
    assert len(fake_model.requests) == 1
    # Kept as context: the next follow-up's prompt holds it, in order.
    await bot.say(fake_slack, "C1", "ok, so what now?", thread_ts=root)
    await bot.idle()
    assert bot_texts(fake_slack) == ["First answer.", "Second answer."]
    sent = fake_model.requests[-1].body["messages"]
    assert sent[-2]["name"] == "UBOB"
    assert sent[-1] == {"role": "user", "content": "ok, so what now?", "name": "UALICE"}


async def test_text_that_only_looks_like_a_mention_or_names_a_channel_is_answered(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """Typed `<@U1>` arrives escaped, and a channel link addresses nobody: both continue."""
    fake_model.script(*(Script(text=t) for t in ("First answer.", "Two.", "Three.", "Four.")))
    root = await answered_thread(bot, fake_slack)
    await bot.say(fake_slack, "C1", "what does &lt;@UCAROL&gt; mean?", thread_ts=root)
    await bot.idle()
    await bot.say(fake_slack, "C1", "post it in <#C2|random>", thread_ts=root)
    await bot.idle()
    await bot.say(fake_slack, "C1", "due <!date^1700000000^{date}|Nov 14>?", thread_ts=root)
    await bot.idle()
    assert bot_texts(fake_slack) == ["First answer.", "Two.", "Three.", "Four."]
    assert fake_model.requests[1].body["messages"][-1]["content"] == "what does <@UCAROL> mean?"


async def test_mentioning_the_bot_beside_someone_else_is_answered(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Script(text="First answer."), Script(text="Second answer."))
    root = await answered_thread(bot, fake_slack)
    text = f"<@UCAROL> and <@{BOT_USER_ID}>: who owns this?"
    await bot.say(fake_slack, "C1", text, user="UBOB", thread_ts=root)
    await bot.idle()
    assert bot_texts(fake_slack) == ["First answer.", "Second answer."]


async def test_mention_mode_answers_only_mentions_as_before(
    mention_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = mention_bot
    fake_model.script(Script(text="First answer."), Script(text="Second answer."))
    root = await answered_thread(bot, fake_slack)
    await bot.say(fake_slack, "C1", "and who fixed it?", user="UBOB", thread_ts=root)
    await bot.idle()
    assert bot_texts(fake_slack) == ["First answer."]
    await bot.mention("C1", "so, who?", fake_slack, user="UBOB", thread_ts=root)
    await bot.idle()
    assert bot_texts(fake_slack) == ["First answer.", "Second answer."]
    sent = fake_model.requests[-1].body["messages"]
    assert sent[-2] == {"role": "user", "content": "and who fixed it?", "name": "UBOB"}


async def test_a_thread_the_bot_never_answered_in_stays_unanswered_and_unrecorded(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Script(text="First answer."))
    await answered_thread(bot, fake_slack)  # the bot is in another thread of the channel
    other = fake_slack.add_user_message("C1", "lunch?", user="UBOB")
    await bot.say(fake_slack, "C1", "yes please", thread_ts=other)
    await bot.say(fake_slack, "C1", "top-level chatter")
    await bot.idle()
    assert bot_texts(fake_slack) == ["First answer."]
    assert "yes please" not in await stored_texts(bot)


async def test_bots_edits_and_deletions_in_the_thread_start_nothing(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Script(text="First answer."))
    root = await answered_thread(bot, fake_slack)
    mine = fake_slack.bot_messages("C1")[0]
    base: dict[str, Any] = {"type": "message", "channel": "C1", "channel_type": "channel"}
    deliveries: list[dict[str, Any]] = [
        # the bot's own reply, echoed back as a message event
        {**base, "user": BOT_USER_ID, "text": "First answer.", "ts": mine.ts, "thread_ts": root},
        # another app's bot
        {
            **base,
            "subtype": "bot_message",
            "bot_id": "B0OTHER",
            "text": "deploy finished",
            "ts": "1700000100.000100",
            "thread_ts": root,
        },
        # another app posting as its bot user
        {
            **base,
            "user": "U0OTHERBOT",
            "bot_id": "B0OTHER",
            "text": "beep",
            "ts": "1700000100.000200",
            "thread_ts": root,
        },
        # a person edits their question, then deletes it
        {
            **base,
            "subtype": "message_changed",
            "message": {"user": "UALICE", "text": "edited", "ts": root, "thread_ts": root},
            "ts": "1700000100.000300",
        },
        {**base, "subtype": "message_deleted", "deleted_ts": root, "ts": "1700000100.000400"},
        {
            **base,
            "subtype": "channel_join",
            "user": "UDAVE",
            "text": "<@UDAVE> has joined",
            "ts": "1700000100.000500",
            "thread_ts": root,
        },
    ]
    for event in deliveries:
        assert await bot.send_event(event) == 200
    await bot.idle()
    assert bot_texts(fake_slack) == ["First answer."]
    assert len(fake_model.requests) == 1
    assert not {"deploy finished", "beep", "edited"} & set(await stored_texts(bot))


async def test_a_retried_follow_up_is_answered_once(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(
        Script(text="First answer."), Script(text="Only once.", time_to_first_token=0.2)
    )
    root = await answered_thread(bot, fake_slack)
    ts = fake_slack.add_user_message("C1", "and now?", user="UBOB", thread_ts=root)
    event = {
        "type": "message",
        "channel_type": "channel",
        "channel": "C1",
        "user": "UBOB",
        "text": "and now?",
        "ts": ts,
        "thread_ts": root,
    }
    assert await bot.send_event(event, event_id="EvF1") == 200
    assert await bot.send_event(event, event_id="EvF1", retry_num=1) == 200
    assert await bot.send_event(event, event_id="EvF2") == 200  # same message, another id
    await bot.idle()
    assert bot_texts(fake_slack) == ["First answer.", "Only once."]
    assert len(fake_model.requests) == 2


async def test_a_follow_up_during_a_running_turn_waits_for_it_and_sees_its_answer(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(
        Script(text="First answer."),
        Script(text="A slow second answer.", time_to_first_token=0.5),
        Script(text="Third answer."),
    )
    root = await answered_thread(bot, fake_slack)
    await bot.say(fake_slack, "C1", "tell me more", thread_ts=root)
    await asyncio.sleep(0.1)  # the second turn is waiting for the model
    await bot.say(fake_slack, "C1", "and shorter?", user="UBOB", thread_ts=root)
    await bot.idle()
    assert bot_texts(fake_slack) == ["First answer.", "A slow second answer.", "Third answer."]
    third = fake_model.requests[-1].body["messages"]
    assert third[-2]["content"] == "A slow second answer."  # one turn after the other
    assert third[-1] == {"role": "user", "content": "and shorter?", "name": "UBOB"}


async def test_a_dm_is_answered_in_either_mode(
    mention_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Script(text="Hi."), Script(text="Sure."))
    await mention_bot.say(fake_slack, "D1", "hello")
    await mention_bot.idle()
    await mention_bot.say(fake_slack, "D1", "<@UBOB> said you could help")
    await mention_bot.idle()
    assert [m.text for m in fake_slack.bot_messages("D1")] == ["Hi.", "Sure."]


async def test_reply_in_threads_still_works_as_an_alias(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    assert make_settings(fake_slack, fake_model, sqlite_url).thread_followups == "on"
    old = make_settings(fake_slack, fake_model, sqlite_url, reply_in_threads="mention")
    assert old.thread_followups == "mention"
    always = make_settings(fake_slack, fake_model, sqlite_url, reply_in_threads="always")
    assert always.thread_followups == "on"
    typed = make_settings(fake_slack, fake_model, sqlite_url, thread_followups=" Mention ")
    assert typed.thread_followups == "mention"


def test_bad_or_conflicting_thread_settings_are_refused_in_words(tmp_path: Path) -> None:
    base = {"SLACK_BOT_TOKEN": "xoxb-1", "OPENAI_API_KEY": "sk-x"}
    cases = [
        ({"THREAD_FOLLOWUPS": "always"}, "THREAD_FOLLOWUPS is invalid"),
        (
            {"THREAD_FOLLOWUPS": "on", "REPLY_IN_THREADS": "mention"},
            "REPLY_IN_THREADS=mention disagrees with THREAD_FOLLOWUPS=on",
        ),
    ]
    for env, said in cases:
        result = run_cli(["run"], clean_env(**base, **env), tmp_path)
        assert result.returncode == 2, result.stderr
        assert said in result.stderr
        assert "Traceback" not in result.stderr
