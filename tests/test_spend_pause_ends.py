"""A paused turn ends with its window (issue 29), through the front door: once the budget's
window resets, the pause is abandoned (by the sweeper's pass, or at the first click), its card
says the budget reset and to ask again, and neither button resumes anything; a raise approved
after the reset resumes nothing and never claims it did. And a pause whose budget a reload
removed: Continue goes on without it, on the usual model."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from copy import deepcopy
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.slack import cards
from bot.slack.budget_card import ASK_RAISE, CONTINUE_CHEAPER, RESET
from bot.states import State
from tests.fakes.openai import FakeOpenAI
from tests.fakes.slack import FakeSlack, StoredMessage, wait_until
from tests.harness import RunningBot
from tests.raise_helpers import (
    applied,
    budget_policy,
    card_in,
    pause_card,
    pause_turn,
    raises,
    raising_bot,
    shows,
    until_applied,
)
from tests.raise_helpers import ask as ask_to_raise
from tests.spend_front import (
    CHEAPER,
    ask,
    budget,
    buttons,
    outbox,
    pause_cards,
    pauses,
    policy,
    resumed,
    spend_of,
    spend_running,
)
from tests.test_budget_bypass import spend_the_edits


def tomorrow() -> Callable[[], datetime]:
    """The ledger's clock a day on: past the reset of today's window, whatever the hour."""
    return lambda: datetime.now(UTC) + timedelta(days=1)


async def paused(bot: RunningBot, slack: FakeSlack) -> StoredMessage:
    """Alice's budget used up by her first question, her second paused: its card."""
    await ask(bot, slack, "first question")
    await ask(bot, slack, "second question")
    [card] = pause_cards(slack)
    assert buttons(card) == [CONTINUE_CHEAPER, ASK_RAISE]
    return deepcopy(card)  # as it showed, for clicks after its edit


def says_reset(card: StoredMessage) -> bool:
    return card.text.startswith("Budget reached: demo") and RESET in card.text


async def test_the_sweep_abandons_a_pause_whose_window_reset_and_its_buttons_do_nothing(
    spend_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = spend_bot
    card = await paused(bot, fake_slack)
    await bot.countersign.sweeper.sweep()  # within the window: nothing ends
    await bot.idle()
    assert [p.state for p in await pauses(bot)] == ["paused"]
    spend_of(bot).now = tomorrow()
    edits = len(fake_slack.calls_to("chat.update"))
    await bot.countersign.sweeper.sweep()
    await bot.idle()
    [pause] = await pauses(bot)
    assert pause.state == "abandoned"
    [shown] = pause_cards(fake_slack)
    assert says_reset(shown)
    assert buttons(shown) == []
    assert "today" not in shows(shown)  # its figures were the old window's
    await bot.countersign.sweeper.sweep()  # once: the next pass edits nothing
    await bot.idle()
    assert len(fake_slack.calls_to("chat.update")) == edits + 1
    for action in (CONTINUE_CHEAPER, ASK_RAISE):  # the old card, clicked
        assert await bot.click(card, action, "UALICE", "C1") == 200
        await bot.idle()
    assert fake_slack.ephemerals_for("UALICE")[-2:] == [RESET, RESET]
    assert fake_slack.views == []
    assert len(fake_model.requests) == 1
    assert await outbox(bot) == []
    assert [p.state for p in await pauses(bot)] == ["abandoned"]


async def test_a_click_after_the_reset_ends_the_pause_before_any_sweep(
    spend_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = spend_bot
    card = await paused(bot, fake_slack)
    spend_of(bot).now = tomorrow()
    assert await bot.click(card, CONTINUE_CHEAPER, "UALICE", "C1") == 200
    await bot.idle()
    assert fake_slack.ephemerals_for("UALICE") == [RESET]
    [pause] = await pauses(bot)
    assert (pause.state, pause.model) == ("abandoned", None)
    [shown] = pause_cards(fake_slack)
    assert says_reset(shown)
    assert buttons(shown) == []
    assert len(fake_model.requests) == 1
    assert await outbox(bot) == []


async def test_a_raise_approved_after_the_reset_resumes_nothing_and_says_so(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, tmp_path: Path
) -> None:
    """Asked today, approved tomorrow, before any sweep: the raise applies to the window it
    named (what the owner approved), the turn stays ended, and nothing claims a resumed reply
    or a raise "today"."""
    async with raising_bot(fake_slack, fake_model, sqlite_url, tmp_path, budget_policy()) as bot:
        _pause_id, card = await pause_turn(bot, fake_slack, fake_model)
        await ask_to_raise(bot, fake_slack, card)
        bob = await card_in(fake_slack, "DBOB")
        spend_of(bot).now = tomorrow()
        asked_before = len(fake_model.requests)
        assert await bot.click(bob, cards.APPROVE, "UBOB", "DBOB") == 200
        await bot.idle()
        await until_applied(bot, 1)
        await wait_until(lambda: says_reset_raise(pause_card(fake_slack, card.ts)), timeout=10)
        await bot.idle()
        [pause] = await pauses(bot)
        assert pause.state == "abandoned"
        assert len(fake_model.requests) == asked_before
        assert await outbox(bot) == []
        shown = shows(pause_card(fake_slack, card.ts))
        assert "Raised to" not in shown
        assert ASK_RAISE not in shown
        [raised] = await raises(bot)
        assert raised.state == State.SUCCEEDED
        assert raised.result_summary is not None
        assert "has since reset" in raised.result_summary
        assert "the paused reply continues" not in raised.result_summary
        assert "today" not in raised.result_summary


def says_reset_raise(card: StoredMessage) -> bool:
    return card.text.startswith("Budget reached: support-daily") and RESET in card.text


async def test_a_raise_still_waiting_when_the_sweep_ends_the_pause_resumes_nothing(
    spend_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = spend_bot
    card = await paused(bot, fake_slack)
    status, _ = await ask_to_raise(bot, fake_slack, card, "UALICE", {"tokens": "20000"})
    assert status == 200
    bob = await card_in(fake_slack, "DBOB")
    spend_of(bot).now = tomorrow()
    await bot.countersign.sweeper.sweep()
    await bot.idle()
    assert says_reset(pause_cards(fake_slack)[0])
    assert await bot.click(bob, cards.APPROVE, "UBOB", "DBOB") == 200
    await bot.idle()
    await until_applied(bot, 1)
    await wait_until(lambda: bool(raised_summary_of(fake_slack)), timeout=10)
    await bot.idle()
    assert len(fake_model.requests) == 1
    assert await outbox(bot) == []
    [pause] = await pauses(bot)
    assert pause.state == "abandoned"
    [shown] = pause_cards(fake_slack)
    assert says_reset(shown)  # not "Raised to 20,000 tokens today"
    assert buttons(shown) == []
    [raised] = await raises(bot)
    assert raised.result_summary is not None
    assert "nothing continues" in raised.result_summary
    assert len(await applied(bot)) == 1


def raised_summary_of(slack: FakeSlack) -> str:
    """The owner's card once the raise ran: what it says of the outcome."""
    found = [c for c in slack.cards("DBOB") if "has since reset" in shows(c)]
    return shows(found[-1]) if found else ""


@pytest.mark.parametrize(
    "left",
    [
        policy(),  # no budget at all
        policy(budget("workspace: true", tokens=100_000).replace("name: demo", "name: all")),
    ],
    ids=["no-budgets", "another-budget"],
)
async def test_continue_after_a_reload_removed_the_budget_goes_on_without_it(
    spend_bot: RunningBot,
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    tmp_path: Path,
    left: str,
) -> None:
    """The budget that paused the turn is gone: nothing waits to be raised, no cheaper model is
    named. Continue resumes the turn on the usual model (the budgets still in force count its
    calls), and the card says why; it never tells Alice to ask an owner to raise it."""
    bot = spend_bot
    card = await paused(bot, fake_slack)
    (tmp_path / "policy.yaml").write_text(left)
    assert await bot.countersign.reload_policy()
    assert await bot.click(card, CONTINUE_CHEAPER, "UALICE", "C1") == 200
    await resumed(bot, fake_model, 2)
    assert [r.body["model"] for r in fake_model.requests] == ["fake-model", "fake-model"]
    assert not any("raise" in t for t in fake_slack.ephemerals_for("UALICE"))
    [shown] = pause_cards(fake_slack)
    assert "The budget demo is no longer in the policy" in shown.text
    assert "chosen by <@UALICE>" in shown.text
    assert buttons(shown) == []
    [pause] = await pauses(bot)
    assert (pause.state, pause.model, pause.decided_by) == ("resumed", None, "UALICE")


async def test_a_removed_budgets_pause_still_ends_with_its_window(
    spend_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI, tmp_path: Path
) -> None:
    """The pause keeps when its window resets: a reload that drops the budget does not make a
    week-old card resumable."""
    bot = spend_bot
    card = await paused(bot, fake_slack)
    other = budget("workspace: true", tokens=100_000, extra=CHEAPER)
    (tmp_path / "policy.yaml").write_text(policy(other.replace("name: demo", "name: all")))
    assert await bot.countersign.reload_policy()
    spend_of(bot).now = tomorrow()
    assert await bot.click(card, CONTINUE_CHEAPER, "UALICE", "C1") == 200
    await bot.idle()
    assert fake_slack.ephemerals_for("UALICE") == [RESET]
    assert len(fake_model.requests) == 1
    [pause] = await pauses(bot)
    assert pause.state == "abandoned"
    assert says_reset(pause_cards(fake_slack)[0])


async def test_a_reset_card_slack_refused_is_shown_at_the_next_click(
    spend_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """Slack refused the sweep's edit (an outage, a 429 past the client's retries): the pause
    ended all the same, but its card still shows both buttons. A click on them (only that
    stale card has them) shows the reset card, so the buttons do not stay forever."""
    bot = spend_bot
    card = await paused(bot, fake_slack)
    spend_of(bot).now = tomorrow()
    fake_slack.fail_methods["chat.update"] = "internal_error"
    await bot.countersign.sweeper.sweep()
    await bot.idle()
    assert [p.state for p in await pauses(bot)] == ["abandoned"]
    assert buttons(pause_cards(fake_slack)[0]) == [CONTINUE_CHEAPER, ASK_RAISE]
    del fake_slack.fail_methods["chat.update"]
    assert await bot.click(card, CONTINUE_CHEAPER, "UALICE", "C1") == 200
    await bot.idle()
    assert fake_slack.ephemerals_for("UALICE") == [RESET]
    [shown] = pause_cards(fake_slack)
    assert says_reset(shown)
    assert buttons(shown) == []
    assert len(fake_model.requests) == 1
    assert await outbox(bot) == []


async def test_the_sweep_does_not_wait_a_minute_for_the_edit_budget(
    spend_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """The minute's chat.update budget spent by other cards (or 60 pauses ending at midnight):
    the sweeper's pass, which a start-up awaits and every other job of the sweeper follows,
    leaves the card edits it gets no slot for to a later pass instead of waiting the window
    out. The pause meanwhile resumes nothing: a click still ends it."""
    bot = spend_bot
    card = await paused(bot, fake_slack)
    spend_of(bot).now = tomorrow()
    await spend_the_edits(bot, fake_slack)
    before = len(fake_slack.calls_to("chat.update"))
    started = asyncio.get_running_loop().time()
    await asyncio.wait_for(bot.countersign.sweeper.sweep(), 15)
    assert asyncio.get_running_loop().time() - started < 10
    assert fake_slack.calls_to("chat.update")[before:] == []
    assert await bot.click(card, CONTINUE_CHEAPER, "UALICE", "C1") == 200
    for _ in range(100):
        if [p.state for p in await pauses(bot)] == ["abandoned"]:
            break
        await asyncio.sleep(0.05)
    assert [p.state for p in await pauses(bot)] == ["abandoned"]
    assert len(fake_model.requests) == 1
    assert await outbox(bot) == []
    await bot.countersign.budget.stop()  # the click's card edit waits: stop it


async def test_a_form_sent_after_the_reset_is_answered_within_slacks_three_seconds(
    spend_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """The raise form opened before the reset, sent after it, while other cards spent the
    minute's edits: Slack waits 3 s for the form's answer. The answer says the budget reset;
    it does not wait for the card's edit first (the sweep ends the pause and edits it)."""
    bot = spend_bot
    card = await paused(bot, fake_slack)
    assert await bot.click(card, ASK_RAISE, "UALICE", "C1") == 200
    await bot.idle()
    view = fake_slack.views[-1]["view"]
    spend_of(bot).now = tomorrow()
    await spend_the_edits(bot, fake_slack)
    started = asyncio.get_running_loop().time()
    status, body = await asyncio.wait_for(bot.submit_view(view, "UALICE", {}), 15)
    assert asyncio.get_running_loop().time() - started < 3
    assert status == 200
    assert RESET[:100] in body
    assert await raises(bot) == []
    await bot.countersign.budget.stop()


async def test_a_weekly_raise_approved_after_the_reset_names_its_week_in_words(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, tmp_path: Path
) -> None:
    """The outcome of a raise approved after its window reset names that window as people
    say it ("the week of 23 Nov 2026"), never by the ledger's key ("2026-W48"): it is shown
    on the owners' card and kept as the raise's result."""
    path = tmp_path / "policy.yaml"
    path.write_text(policy(budget("user: UALICE", window="week", extra=CHEAPER)))
    async with spend_running(fake_slack, fake_model, sqlite_url, path) as bot:
        card = await paused(bot, fake_slack)
        [pause] = await pauses(bot)
        assert "-W" in pause.window_key
        status, _ = await ask_to_raise(bot, fake_slack, card, "UALICE", {"tokens": "20000"})
        assert status == 200
        bob = await card_in(fake_slack, "DBOB")
        spend_of(bot).now = lambda: datetime.now(UTC) + timedelta(days=8)
        assert await bot.click(bob, cards.APPROVE, "UBOB", "DBOB") == 200
        await bot.idle()
        await until_applied(bot, 1)
        await wait_until(lambda: bool(raised_summary_of(fake_slack)), timeout=10)
        [raised] = await raises(bot)
        assert raised.result_summary is not None
        assert "the week of " in raised.result_summary
        assert pause.window_key not in raised.result_summary
        assert "for the week of " in raised_summary_of(fake_slack)  # the card's outcome line
