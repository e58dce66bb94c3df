"""When the model fails, the reply says so in plain words and the stored history stays valid."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy import select

from bot.conversation.history import is_valid_history
from bot.db.models import Message, Role
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack
from tests.harness import RunningBot, make_settings, start_bot, stop_bot


@pytest.fixture
async def impatient_bot(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> AsyncIterator[RunningBot]:
    running = await start_bot(
        make_settings(fake_slack, fake_model, sqlite_url, llm_timeout_seconds=1, llm_max_retries=0)
    )
    yield running
    await stop_bot(running)


async def messages(bot: RunningBot) -> list[Message]:
    async with bot.countersign.db.transaction() as session:
        return list((await session.scalars(select(Message).order_by(Message.id))).all())


async def assert_recovers(bot: RunningBot, slack: FakeSlack, model: FakeOpenAI, root: str) -> None:
    """After a failure the same thread still works and its history is well-formed."""
    model.script(Script(text="Recovered."))
    await bot.mention("C1", "try again", slack, thread_ts=root)
    await bot.idle()
    assert slack.bot_messages("C1")[-1].text == "Recovered."
    stored = await messages(bot)
    assert is_valid_history(stored)
    assert [m.role for m in stored] == [Role.USER, Role.USER, Role.ASSISTANT]
    roles = [m["role"] for m in model.requests[-1].body["messages"]]
    assert roles == ["system", "user", "user"]


async def test_model_500_after_retries_gives_a_clear_message(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(*[Script(fail_status=500)] * 3)
    root = await bot.mention("C1", "hello", fake_slack)
    await bot.idle()
    (reply,) = fake_slack.bot_messages("C1")
    assert "could not finish this reply" in reply.text
    assert "the model service returned an error (500)" in reply.text
    assert len(fake_model.requests) == 3  # the SDK retried twice (LLM_MAX_RETRIES=2)
    assert [m.role for m in await messages(bot)] == [Role.USER]
    await assert_recovers(bot, fake_slack, fake_model, root)


async def test_a_single_500_is_retried_by_the_sdk(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Script(fail_status=500), Script(text="Fine after all."))
    await bot.mention("C1", "hello", fake_slack)
    await bot.idle()
    assert [m.text for m in fake_slack.bot_messages("C1")] == ["Fine after all."]
    assert len(fake_model.requests) == 2


async def test_cut_stream_keeps_the_partial_text_and_says_it_broke_off(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Script(text="alpha beta gamma delta epsilon zeta", cut_after_tokens=3))
    root = await bot.mention("C1", "hello", fake_slack)
    await bot.idle()
    (reply,) = fake_slack.bot_messages("C1")
    assert reply.text.startswith("alpha beta gamma\n\n:warning:")
    assert "could not finish this reply" in reply.text
    assert [m.role for m in await messages(bot)] == [Role.USER]
    await assert_recovers(bot, fake_slack, fake_model, root)


async def test_hanging_model_times_out_with_a_message(
    impatient_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Script(text="one two three four five", hang_after_tokens=2))
    await impatient_bot.mention("C1", "hello", fake_slack)
    await impatient_bot.idle()
    (reply,) = fake_slack.bot_messages("C1")
    assert reply.text.startswith("one two\n\n:warning:")
    assert "did not answer in time" in reply.text or "broke off" in reply.text


async def test_wrong_api_key_is_explained(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    running = await start_bot(
        make_settings(fake_slack, fake_model, sqlite_url, openai_api_key="sk-wrong-key-123")
    )
    try:
        await running.mention("C1", "hello", fake_slack)
        await running.idle()
    finally:
        await stop_bot(running)
    (reply,) = fake_slack.bot_messages("C1")
    assert "rejected our API key (check OPENAI_API_KEY)" in reply.text
