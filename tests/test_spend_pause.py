"""A turn pauses at a budget's limit (issue 29), through the front door: the pause card, its
"Continue on a cheaper model" button, the resumed turn on the cheaper model (once, for the
requester, from where it stopped), and a resumed turn that meets another limit."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import update

from bot.db.models import BudgetPause
from bot.slack import cards
from bot.slack.budget_card import ASK_RAISE, CONTINUE_CHEAPER
from tests.fakes.openai import FakeOpenAI, Script, ScriptedToolCall
from tests.fakes.slack import FakeSlack, StoredMessage, wait_until
from tests.harness import RunningBot
from tests.spend_front import (
    BIG,
    CHEAPER,
    ask,
    budget,
    buttons,
    outbox,
    pause_cards,
    pauses,
    policy,
    resumed,
    spend_running,
    standing,
)
from tests.test_approvals_flow import CREATE, call, proposals


async def test_a_spent_budget_pauses_the_turn_with_a_card_and_asks_no_model(
    spend_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    await ask(spend_bot, fake_slack, "first question")
    assert len(fake_model.requests) == 1
    assert not pause_cards(fake_slack)
    before = len(fake_slack.calls)
    root = await ask(spend_bot, fake_slack, "second question")
    assert len(fake_model.requests) == 1  # no call over the limit
    [card] = pause_cards(fake_slack)
    assert card.thread_ts == root
    assert card.text.startswith("Budget reached: demo, ")
    assert "of 3,000 tokens today; resets 00:00 UTC" in card.text
    assert buttons(card) == [CONTINUE_CHEAPER, ASK_RAISE]
    shown = str(card.blocks)
    assert "UALICE" in shown  # people as mentions, no other id
    assert "<@UALICE>" in shown
    assert "could not finish" not in card.text  # a plain pause, not a failure
    # The reply is the card: its placeholder's one final edit carries the card's text and
    # buttons (not an edit to a note and a post of the card under it).
    [reply] = [m for m in fake_slack.thread("C1", root) if m.bot_id]
    assert reply.ts == card.ts
    chat = [c.method for c in fake_slack.calls[before:] if c.method.startswith("chat.")]
    assert chat == ["chat.postMessage", "chat.update"]  # the placeholder, then the card
    [pause] = await pauses(spend_bot)
    assert (pause.state, pause.requester, pause.budget) == ("paused", "UALICE", "demo")
    assert pause.card_ts == card.ts
    assert pause.thread_ts == root


async def test_someone_the_budget_does_not_count_is_not_paused(
    spend_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    await ask(spend_bot, fake_slack, "first question")
    await ask(spend_bot, fake_slack, "bob's question", user="UBOB")
    assert len(fake_model.requests) == 2
    assert not pause_cards(fake_slack)


async def test_continue_on_a_cheaper_model_resumes_once_for_the_requester_only(
    spend_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    await ask(spend_bot, fake_slack, "first question")
    root = await ask(spend_bot, fake_slack, "second question")
    [card] = pause_cards(fake_slack)
    assert await spend_bot.click(card, CONTINUE_CHEAPER, "UBOB", "C1") == 200
    await spend_bot.idle()
    assert any("Only <@UALICE>" in t for t in fake_slack.ephemerals_for("UBOB"))
    assert len(fake_model.requests) == 1
    assert await spend_bot.click(card, CONTINUE_CHEAPER, "UALICE", "C1") == 200
    assert await spend_bot.click(card, CONTINUE_CHEAPER, "UALICE", "C1") == 200
    await spend_bot.idle()
    await resumed(spend_bot, fake_model, 2)
    assert [r.body["model"] for r in fake_model.requests] == ["fake-model", "cheap-model"]
    last = fake_model.requests[-1].body["messages"]
    assert [m["content"] for m in last if m["role"] == "user"][-1] == "second question"
    assert sum(m["content"] == "second question" for m in last if m["role"] == "user") == 1
    assert "already handled" in " ".join(fake_slack.ephemerals_for("UALICE"))
    [updated] = pause_cards(fake_slack)
    assert "Continuing on cheap-model, chosen by <@UALICE>" in updated.text
    assert buttons(updated) == []
    answers = [m.text for m in fake_slack.thread("C1", root) if m.text == "An answer."]
    assert answers == ["An answer."]  # the resumed turn answered in its thread, once
    [pause] = await pauses(spend_bot)
    assert (pause.state, pause.model, pause.decided_by) == ("resumed", "cheap-model", "UALICE")


async def test_a_click_before_the_cards_ts_is_recorded_still_updates_the_card(
    spend_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """The turn records its card's ts with other turns' writes after posting it; a quick click
    can come first (seen in the sandbox): the clicked card is the card, and is recorded."""
    await ask(spend_bot, fake_slack, "first question")
    await ask(spend_bot, fake_slack, "second question")
    [card] = pause_cards(fake_slack)
    async with spend_bot.countersign.db.transaction() as session:
        await session.execute(update(BudgetPause).values(card_ts=None))
    assert await spend_bot.click(card, CONTINUE_CHEAPER, "UALICE", "C1") == 200
    await spend_bot.idle()
    await resumed(spend_bot, fake_model, 2)
    [updated] = pause_cards(fake_slack)
    assert "Continuing on cheap-model, chosen by <@UALICE>" in updated.text
    [pause] = await pauses(spend_bot)
    assert (pause.state, pause.card_ts) == ("resumed", card.ts)


async def test_a_resumed_turn_another_budget_refuses_pauses_again_with_a_new_card(
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    sqlite_url: str,
    tmp_path: Path,
) -> None:
    path = tmp_path / "policy.yaml"
    # Alice's own budget stops her second question; the workspace's still has room for it
    # (and for Bob's), but no longer once Bob has asked: her resumed turn stops there.
    other = budget("workspace: true", tokens=10_000).replace("name: demo", "name: everyone")
    path.write_text(policy(budget("user: UALICE", tokens=4_000, extra=CHEAPER), other))
    async with spend_running(fake_slack, fake_model, sqlite_url, path) as bot:
        await ask(bot, fake_slack, "first question")
        await ask(bot, fake_slack, "second question")
        [card] = pause_cards(fake_slack)
        assert "demo" in card.text
        await ask(bot, fake_slack, "bob's question", user="UBOB")
        assert len(fake_model.requests) == 2
        assert await bot.click(card, CONTINUE_CHEAPER, "UALICE", "C1") == 200
        await wait_until(lambda: len(pause_cards(fake_slack)) == 2)
        await bot.idle()
        assert len(fake_model.requests) == 2
        second = pause_cards(fake_slack)[1]
        assert second.text.startswith("Budget reached: everyone, ")
        assert second.thread_ts == card.thread_ts
        states = [(p.budget, p.state) for p in await pauses(bot)]
        assert states == [("demo", "resumed"), ("everyone", "paused")]
        [request] = await outbox(bot)
        assert request.done_at is not None  # the resume is done: it paused again


async def test_a_per_turn_budget_pauses_between_tool_rounds_and_resumes_the_same_turn(
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    sqlite_url: str,
    tmp_path: Path,
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(policy(budget("per_turn: true", window="turn", extra=CHEAPER)))
    listing = ScriptedToolCall("l1", "list_tasks", '{"status": "any"}')
    fake_model.script(Script(tool_calls=[listing], prompt_tokens=BIG))
    async with spend_running(fake_slack, fake_model, sqlite_url, path) as bot:
        root = await ask(bot, fake_slack, "what is open?")
        assert len(fake_model.requests) == 1
        [card] = pause_cards(fake_slack)
        assert "this turn" in card.text
        assert card.thread_ts == root
        assert await bot.click(card, CONTINUE_CHEAPER, "UALICE", "C1") == 200
        await resumed(bot, fake_model, 2)
        resumed_with = fake_model.requests[-1].body
        assert resumed_with["model"] == "cheap-model"
        assert resumed_with["messages"][-1]["role"] == "tool"  # where it stopped
        [pause] = await pauses(bot)
        counted = await standing(bot, pause.turn_key)
        assert counted.used_tokens >= 2 * BIG  # both calls, before and after the pause
        await ask(bot, fake_slack, "and now?")  # a new turn: a new window
        assert len(fake_model.requests) == 3


async def test_a_native_reply_that_pauses_is_the_card_its_stop_carries(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, policy_path: Path
) -> None:
    """Streamed natively: the stream's one stop carries the card's text and buttons."""
    async with spend_running(
        fake_slack, fake_model, sqlite_url, policy_path, streaming="native"
    ) as bot:
        await ask(bot, fake_slack, "first question")
        before = len(fake_slack.calls)
        root = await ask(bot, fake_slack, "second question")
        [card] = pause_cards(fake_slack)
        assert card.thread_ts == root
        assert buttons(card) == [CONTINUE_CHEAPER, ASK_RAISE]
        chat = [c.method for c in fake_slack.calls[before:] if c.method.startswith("chat.")]
        assert chat == ["chat.startStream", "chat.stopStream"]
        [pause] = await pauses(bot)
        assert pause.card_ts == card.ts
        assert await bot.click(card, CONTINUE_CHEAPER, "UALICE", "C1") == 200
        await resumed(bot, fake_model, 2)
        [chosen] = pause_cards(fake_slack)
        assert "Continuing on cheap-model, chosen by <@UALICE>" in chosen.text
        assert buttons(chosen) == []


async def test_a_reply_that_showed_words_keeps_them_and_the_card_comes_under_it(
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    sqlite_url: str,
    tmp_path: Path,
) -> None:
    """Words, then a tool round the budget has no room for: the reply ends with a note and
    the card is a message of its own, so the card's later edit (the choice) leaves the
    reply's words as they were."""
    path = tmp_path / "policy.yaml"
    path.write_text(policy(budget("per_turn: true", window="turn", extra=CHEAPER)))
    listing = ScriptedToolCall("l1", "list_tasks", '{"status": "any"}')
    fake_model.script(Script(text="Let me look.", tool_calls=[listing], prompt_tokens=BIG))
    async with spend_running(fake_slack, fake_model, sqlite_url, path) as bot:
        root = await ask(bot, fake_slack, "what is open?")
        [card] = pause_cards(fake_slack)
        [reply] = [m for m in fake_slack.thread("C1", root) if m.bot_id and m.ts != card.ts]
        assert reply.text.startswith("Let me look.")
        assert "Paused: the budget demo is used up (see below)" in reply.text
        assert card.thread_ts == root
        [pause] = await pauses(bot)
        assert pause.card_ts == card.ts
        assert await bot.click(card, CONTINUE_CHEAPER, "UALICE", "C1") == 200
        await resumed(bot, fake_model, 2)
        [chosen] = pause_cards(fake_slack)
        assert "Continuing on cheap-model" in chosen.text
        [kept] = [m for m in fake_slack.thread("C1", root) if m.ts == reply.ts]
        assert kept.text.startswith("Let me look.")


async def test_a_crafted_continue_button_changes_nothing(
    spend_bot: RunningBot,
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    caplog: pytest.LogCaptureFixture,
) -> None:
    await ask(spend_bot, fake_slack, "first question")
    await ask(spend_bot, fake_slack, "second question")
    [card] = pause_cards(fake_slack)
    [button] = [e for b in card.blocks or [] for e in b.get("elements", []) if "value" in e][:1]
    crafted = (("999", "C1"), ("x1", "C1"), (button["value"], "C2"), ("9" * 20, "C1"), ("²", "C1"))
    for value, channel in crafted:
        forged = StoredMessage(
            card.ts, card.text, card.user, card.bot_id, card.thread_ts,
            blocks=[{"type": "actions", "elements": [
                {"action_id": CONTINUE_CHEAPER, "value": value}
            ]}],
        )  # fmt: skip
        assert await spend_bot.click(forged, CONTINUE_CHEAPER, "UALICE", channel) == 200
    await spend_bot.idle()
    assert len(fake_model.requests) == 1
    [pause] = await pauses(spend_bot)
    assert pause.state == "paused"
    assert [c.text for c in pause_cards(fake_slack)] == [card.text]
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == []


async def test_a_turn_continued_on_the_cheaper_model_stays_on_it_after_an_approval(
    spend_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    await ask(spend_bot, fake_slack, "first question")
    await ask(spend_bot, fake_slack, "make a task")
    [card] = pause_cards(fake_slack)
    fake_model.script(Script(tool_calls=[call("create_task", CREATE)], prompt_tokens=BIG))
    assert await spend_bot.click(card, CONTINUE_CHEAPER, "UALICE", "C1") == 200
    await resumed(spend_bot, fake_model, 2)
    [proposal] = await proposals(spend_bot)
    [write] = [c for c in fake_slack.cards("C1") if c not in pause_cards(fake_slack)]
    assert await spend_bot.click(write, cards.APPROVE, "UALICE", "C1") == 200
    await resumed(spend_bot, fake_model, 3)
    assert [r.body["model"] for r in fake_model.requests] == [
        "fake-model",
        "cheap-model",
        "cheap-model",  # after the approval, the turn goes on where it was: the cheaper model
    ]
    assert len(pause_cards(fake_slack)) == 1
    assert proposal.requester == "UALICE"


async def test_in_a_dm_the_card_is_in_the_dm_and_the_turn_resumes_there(
    spend_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    for text in ("hello", "are you there?"):
        await spend_bot.say(fake_slack, "D1", text)
        await spend_bot.idle()
    [card] = pause_cards(fake_slack, "D1")
    assert card.text.startswith("Budget reached: demo, ")
    assert await spend_bot.click(card, CONTINUE_CHEAPER, "UALICE", "D1") == 200
    await resumed(spend_bot, fake_model, 2)
    assert fake_model.requests[-1].body["model"] == "cheap-model"
    assert [m.text for m in fake_slack.bot_messages("D1")].count("An answer.") == 2


async def test_another_persons_turn_resumed_after_an_approval_stays_theirs(
    spend_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """Bob's turn waits on his write; in his thread Alice's turn pauses at her budget and she
    continues on the cheaper model. Bob's write approved, his turn goes on as his own, on the
    configured model: never as Alice's (her reach, her name on its next write, her budget's
    cheaper model)."""
    await ask(spend_bot, fake_slack, "first question")
    fake_model.script(Script(tool_calls=[call("create_task", CREATE)], prompt_tokens=BIG))
    root = await ask(spend_bot, fake_slack, "make a task", user="UBOB")
    await spend_bot.mention("C1", "and mine?", fake_slack, user="UALICE", thread_ts=root)
    await spend_bot.idle()
    [card] = pause_cards(fake_slack)
    assert await spend_bot.click(card, CONTINUE_CHEAPER, "UALICE", "C1") == 200
    await resumed(spend_bot, fake_model, 3)
    [write] = [c for c in fake_slack.cards("C1") if c not in pause_cards(fake_slack)]
    again = call("create_task", {**CREATE, "title": "Follow-up"}, "call_2")
    fake_model.script(Script(tool_calls=[again], prompt_tokens=BIG))
    assert await spend_bot.click(write, cards.APPROVE, "UBOB", "C1") == 200
    await resumed(spend_bot, fake_model, 4)
    assert [r.body["model"] for r in fake_model.requests] == [
        "fake-model",
        "fake-model",
        "cheap-model",  # Alice's turn, continued
        "fake-model",  # Bob's, after his approval
    ]
    first, follow_up = await proposals(spend_bot)
    assert (first.requester, follow_up.requester) == ("UBOB", "UBOB")
