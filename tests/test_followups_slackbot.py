"""Slackbot is a bot that Slack does not mark as one: its messages (reminders, notices) come
from the user `USLACKBOT` with no `bot_id` and often no subtype. In a thread the bot answered
in, such a message is not a person continuing the conversation: it starts no turn (answering
it could start an exchange of bots), and is not kept as a person's words either."""

from __future__ import annotations

from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack
from tests.harness import RunningBot
from tests.test_thread_followups import answered_thread, bot_texts, stored_texts


async def test_a_slackbot_message_in_the_thread_starts_nothing(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Script(text="First answer."), Script(text="Second answer."))
    root = await answered_thread(bot, fake_slack)
    event = {
        "type": "message",
        "channel": "C1",
        "channel_type": "channel",
        "user": "USLACKBOT",
        "text": "Reminder: standup notes are due.",
        "ts": "1700000100.000600",
        "thread_ts": root,
    }
    assert await bot.send_event(event) == 200
    await bot.idle()
    assert bot_texts(fake_slack) == ["First answer."]
    assert len(fake_model.requests) == 1
    assert "Reminder: standup notes are due." not in await stored_texts(bot)


async def test_a_slackbot_message_in_the_dm_starts_nothing(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    event = {
        "type": "message",
        "channel": "DUALICE",
        "channel_type": "im",
        "user": "USLACKBOT",
        "text": "You have a new message.",
        "ts": "1700000100.000700",
    }
    assert await bot.send_event(event) == 200
    await bot.idle()
    assert fake_model.requests == []
    assert fake_slack.bot_messages("DUALICE") == []
