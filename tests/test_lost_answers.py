"""A Slack answer lost on the way back (the connection dropped after Slack acted) must not
leave a second message behind. slack_sdk's connection-error retry handler re-sends the request,
so Slack carries it out twice; for writes the bot uses one attempt (`single_attempt`) and looks
for what the first attempt did."""

from __future__ import annotations

from bot.slack import cards
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack
from tests.harness import RunningBot
from tests.test_approvals_flow import CREATE, call


async def test_a_reply_whose_placeholder_answer_was_lost_leaves_no_thinking_behind(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Script(text="Hello there."))
    fake_slack.lose_answers["chat.postMessage"] = 1
    await bot.mention("C1", "hi", fake_slack)
    await bot.idle()
    texts = [m.text for m in fake_slack.bot_messages("C1")]
    assert "Hello there." in texts
    assert not any("Thinking" in t for t in texts), texts


async def test_a_reply_refused_with_a_server_error_is_posted_once_after_all(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """A 5xx where Slack did nothing: the thread holds no message with the post's key, so the
    post is tried again, once, and the reply lands."""
    fake_model.script(Script(text="Hello again."))
    fake_slack.server_errors["chat.postMessage"] = 1
    await bot.mention("C1", "hi", fake_slack)
    await bot.idle()
    texts = [m.text for m in fake_slack.bot_messages("C1")]
    assert texts.count("Hello again.") == 1, texts
    assert not any("Thinking" in t for t in texts), texts


async def test_a_long_reply_whose_continuation_answer_was_lost_is_continued_once(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    words = " ".join(f"word{i}" for i in range(1200))  # past one message: a continuation
    fake_model.script(Script(text=words))
    fake_slack.lose_answers["chat.postMessage"] = 2  # the placeholder's and a continuation's
    await bot.mention("C1", "a long one please", fake_slack)
    await bot.idle()
    shown = [m.text for m in fake_slack.bot_messages("C1")]
    assert len(shown) >= 2, shown  # it did continue
    tokens = " ".join(shown).split()
    for i in range(1200):  # every word once: nothing posted twice, nothing lost
        assert tokens.count(f"word{i}") == 1, (i, shown)
    assert not any("Thinking" in t for t in shown), shown


async def test_a_card_whose_answer_was_lost_is_posted_once_and_decides(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """The card's post is marked with the proposal's key: after a lost answer the thread is
    read for it, so no second card (one nobody would ever update) is left with live buttons."""
    fake_model.script(Script(tool_calls=[call("create_task", CREATE)]), Script(text="Done."))
    fake_slack.lose_answers["chat.postMessage"] = 2  # the placeholder's and the card's
    await bot.mention("C1", "track it", fake_slack)
    await bot.idle()
    assert len(fake_slack.cards("C1")) == 1
    await bot.click(fake_slack.cards("C1")[0], cards.APPROVE, "UALICE", "C1")
    await bot.idle()
    texts = [m.text for m in fake_slack.bot_messages("C1")]
    assert "Done." in texts
    assert not any("Thinking" in t for t in texts), texts
