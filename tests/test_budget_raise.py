"""Issue 29, "Ask to raise", through the front door: the pause card's button opens the raise
form (only for the paused turn's requester or the budget's owners); the raise is a proposal
decided by the one door, its card sent to the owners; approved, the window's limit is raised
once and the paused turn resumes once (also from a pause the bot made itself, and with two
replicas approving at once); declined or expired, the turn stays paused and its card says so;
the asker never approves their own raise alone; a reload removing an owner revokes them. What
decides a raise and what the form accepts: tests/test_budget_raise_rules.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from copy import deepcopy
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.db.models import Proposal, utcnow
from bot.slack import cards
from bot.slack.raise_form import ASK_RAISE
from bot.states import State
from tests import spend_front as front
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack, wait_until
from tests.harness import RunningBot, make_settings, start_bot, stop_bot
from tests.raise_helpers import (
    BUDGET,
    FINANCE,
    applied,
    ask,
    audit_events,
    budget_policy,
    card_in,
    limit_now,
    pause_card,
    pause_state,
    pause_turn,
    raises,
    raising_bot,
    shows,
    today,
    until_applied,
)
from tests.spend_front import alices_budget, spend_running


@pytest.fixture
async def raising(
    request: pytest.FixtureRequest,
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    sqlite_url: str,
    tmp_path: Path,
) -> AsyncIterator[RunningBot]:
    policy = getattr(request, "param", budget_policy())
    async with raising_bot(fake_slack, fake_model, sqlite_url, tmp_path, policy) as bot:
        yield bot


async def test_an_owner_approves_and_the_paused_turn_resumes_once(
    raising: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = raising
    pause_id, card = await pause_turn(bot, fake_slack, fake_model)
    status, _ = await ask(bot, fake_slack, card, "UALICE", {"reason": "launch day"})
    assert status == 200
    (proposal,) = await raises(bot)
    assert proposal.state == State.PROPOSED
    # The card goes to the owners (by DM: the user group expanded), field by field.
    bob = await card_in(fake_slack, "DBOB")
    assert fake_slack.cards("DCAT")
    assert "Limit today" in shows(bob)
    day = datetime.now(UTC).date()
    assert f"{day.day} {day:%b %Y}" in shows(bob)  # the window in words beside its key
    assert "*USD*" in shows(bob)  # the money limit's label, not its argument's name "usd"
    assert "$12.00" in shows(bob)
    assert "$24.00" in shows(bob)
    assert "launch day" in shows(bob)
    assert BUDGET in shows(bob)
    assert cards.EDIT not in shows(bob)  # its arguments come from the form, not the model
    fake_model.script(Script(text="continued where it stopped"))
    asked_before = len(fake_model.requests)
    again = deepcopy(bob)  # the card as it showed, for a second click
    assert await bot.click(bob, cards.APPROVE, "UBOB", "DBOB") == 200
    await bot.idle()
    await wait_until(lambda: len(fake_model.requests) == asked_before + 1, timeout=10)
    await bot.idle()
    ((name, window, nano, key),) = await applied(bot)
    assert (name, window, nano) == (BUDGET, today(), 12 * 10**9)
    assert key == (await raises(bot))[0].idempotency_key
    assert await limit_now(bot) == 24 * 10**9
    assert await pause_state(bot, pause_id) == "resumed"
    (settled,) = await raises(bot)
    assert (settled.state, settled.decided_by) == (State.SUCCEEDED, "UBOB")
    events = await audit_events(bot, settled.id)
    assert events[0] == "propose"
    assert "approve" in events
    assert events[-1] == "succeed"
    await wait_until(lambda: "Raised to $24.00 today by <@UBOB>" in shows(pause_card(
        fake_slack, card.ts)), timeout=10)  # fmt: skip
    assert ASK_RAISE not in shows(pause_card(fake_slack, card.ts))
    # Once: a second click, a retry of the sweep, nothing more is asked or raised.
    assert await bot.click(again, cards.APPROVE, "UBOB", "DBOB") == 200
    await bot.idle()
    assert len(await applied(bot)) == 1
    assert await limit_now(bot) == 24 * 10**9
    assert len(fake_model.requests) == asked_before + 1


async def test_a_declined_raise_leaves_the_turn_paused_and_its_card_says_why(
    raising: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = raising
    pause_id, card = await pause_turn(bot, fake_slack, fake_model)
    await ask(bot, fake_slack, card)
    bob = await card_in(fake_slack, "DBOB")
    asked_before = len(fake_model.requests)
    assert await bot.click(bob, cards.DECLINE, "UBOB", "DBOB") == 200
    await bot.idle()
    view = fake_slack.views[-1]["view"]
    status, _ = await bot.submit_view(view, "UBOB", {"reason": "not this week"})
    assert status == 200
    await bot.idle()
    (proposal,) = await raises(bot)
    assert proposal.state == State.DECLINED
    await wait_until(lambda: "declined by <@UBOB>: not this week" in shows(pause_card(
        fake_slack, card.ts)), timeout=10)  # fmt: skip
    shown = shows(pause_card(fake_slack, card.ts))
    assert ASK_RAISE in shown
    assert "Continue on a cheaper model" in shown
    assert await pause_state(bot, pause_id) == "paused"
    assert await applied(bot) == []
    assert len(fake_model.requests) == asked_before
    # Asked again from the updated card: a new raise; while it waits, a third is refused.
    await ask(bot, fake_slack, pause_card(fake_slack, card.ts))
    status, body = await ask(bot, fake_slack, pause_card(fake_slack, card.ts))
    assert "already waiting" in body
    assert [r.state for r in await raises(bot)] == [State.DECLINED, State.PROPOSED]


async def test_only_the_requester_or_an_owner_may_ask_and_only_owners_approve(
    raising: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = raising
    _pause_id, card = await pause_turn(bot, fake_slack, fake_model)
    assert await bot.click(card, ASK_RAISE, "UMALLORY", "C1") == 200
    await bot.idle()
    assert fake_slack.views == []
    assert any("may ask to raise" in t for t in fake_slack.ephemerals_for("UMALLORY"))
    await ask(bot, fake_slack, card, "UCAT")  # an owner through the user group may ask
    (proposal,) = await raises(bot)
    assert proposal.requester == "UCAT"
    bob = await card_in(fake_slack, "DBOB")
    assert fake_slack.cards("DCAT") == []  # four-eyes: not to the asker
    for stranger in ("UMALLORY", "UALICE", "UCAT"):  # not an owner; the asker alone
        assert await bot.click(bob, cards.APPROVE, stranger, "DBOB") == 200
        await bot.idle()
    assert (await raises(bot))[0].state == State.PROPOSED
    assert await applied(bot) == []
    refused = [t for t in fake_slack.ephemerals_for("UMALLORY") if "Nothing changed" in t]
    assert refused
    assert "not one of the approvers" in refused[-1]
    assert any("someone other than the requester" in t for t in fake_slack.ephemerals_for("UCAT"))


async def test_a_crafted_ask_from_another_channel_opens_nothing_and_names_nobody(
    raising: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """The button of a pause in C1, sent from C2: nothing opens, and whose reply paused
    where is not told to someone who may not see it."""
    bot = raising
    _pause_id, card = await pause_turn(bot, fake_slack, fake_model)
    for user in ("UMALLORY", "UALICE"):
        assert await bot.click(card, ASK_RAISE, user, "C2") == 200
        await bot.idle()
    assert fake_slack.views == []
    told = fake_slack.ephemerals_for("UMALLORY")
    assert told
    assert not any("UALICE" in t for t in told)
    assert await raises(bot) == []


async def test_the_asker_who_owns_the_budget_cannot_approve_it_alone(
    raising: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = raising
    _pause_id, card = await pause_turn(bot, fake_slack, fake_model, user="UBOB")
    await ask(bot, fake_slack, card, "UBOB")
    (proposal,) = await raises(bot)
    await card_in(fake_slack, "DCAT")
    assert fake_slack.cards("DBOB") == []
    assert await bot.click_value(proposal.id, cards.APPROVE, "UBOB", "DCAT", fake_slack) == 200
    await bot.idle()
    assert (await raises(bot))[0].state == State.PROPOSED
    assert await applied(bot) == []
    assert await bot.click_value(proposal.id, cards.APPROVE, "UCAT", "DCAT", fake_slack) == 200
    await bot.idle()
    await until_applied(bot, 1)


async def test_a_reload_removing_an_owner_revokes_them_at_the_next_click(
    raising: RunningBot,
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    tmp_path: Path,
) -> None:
    bot = raising
    _pause_id, card = await pause_turn(bot, fake_slack, fake_model)
    await ask(bot, fake_slack, card)
    bob = await card_in(fake_slack, "DBOB")
    (tmp_path / "policy.yaml").write_text(budget_policy(owners=f"[{FINANCE}]"))
    assert await bot.countersign.reload_policy()
    assert await bot.click(bob, cards.APPROVE, "UBOB", "DBOB") == 200
    await bot.idle()
    assert (await raises(bot))[0].state == State.PROPOSED
    assert await applied(bot) == []
    (proposal,) = await raises(bot)
    assert proposal.policy is not None
    assert proposal.policy["approvers"] == [FINANCE]
    assert await bot.click_value(proposal.id, cards.APPROVE, "UCAT", "DCAT", fake_slack) == 200
    await bot.idle()
    await until_applied(bot, 1)


async def test_two_replicas_clicking_at_once_raise_once_and_resume_once(
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    migrated_database_url: str,
    tmp_path: Path,
) -> None:
    """Two bots on one database; both owners approve at the same moment, each on another
    replica: one raise, one resume, one more model call."""
    path = tmp_path / "policy.yaml"
    path.write_text(budget_policy())
    fake_slack.user_groups[FINANCE] = ["UCAT"]
    settings = make_settings(fake_slack, fake_model, migrated_database_url, policy_file=path)
    first, second = await start_bot(settings), await start_bot(settings)
    try:
        pause_id, card = await pause_turn(first, fake_slack, fake_model)
        await ask(first, fake_slack, card)
        bob, cat = await card_in(fake_slack, "DBOB"), await card_in(fake_slack, "DCAT")
        fake_model.script(Script(text="continued"))
        asked_before = len(fake_model.requests)
        await asyncio.gather(
            first.click(bob, cards.APPROVE, "UBOB", "DBOB"),
            second.click(cat, cards.APPROVE, "UCAT", "DCAT"),
        )
        await wait_until(lambda: len(fake_model.requests) == asked_before + 1, timeout=15)
        await first.idle()
        await second.idle()
        assert len(await applied(first)) == 1
        assert await limit_now(first) == 24 * 10**9
        assert await pause_state(first, pause_id) == "resumed"
        assert (await raises(first))[0].state == State.SUCCEEDED
        assert len(fake_model.requests) == asked_before + 1
    finally:
        await stop_bot(second)
        await stop_bot(first)


async def test_an_expired_raise_leaves_the_turn_paused_and_its_card_says_so(
    raising: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = raising
    pause_id, card = await pause_turn(bot, fake_slack, fake_model)
    await ask(bot, fake_slack, card)
    (proposal,) = await raises(bot)
    async with bot.countersign.db.transaction() as session:
        row = await session.get(Proposal, proposal.id)
        assert row is not None
        row.expires_at = utcnow() - timedelta(seconds=1)
    await bot.countersign.sweeper.sweep()
    await bot.idle()
    assert (await raises(bot))[0].state == State.EXPIRED
    await wait_until(
        lambda: "Nobody decided the raise in time" in shows(pause_card(fake_slack, card.ts)),
        timeout=10,
    )
    assert ASK_RAISE in shows(pause_card(fake_slack, card.ts))  # it may be asked again
    assert await pause_state(bot, pause_id) == "paused"
    assert await applied(bot) == []


async def test_a_turn_the_bot_paused_at_its_budget_resumes_once_an_owner_raises_it(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, tmp_path: Path
) -> None:
    """The whole way, with the pause the bot makes itself: Alice's 3,000 tokens a day are used
    up, her next turn pauses with its card; she asks for 20,000; Bob approves; the turn
    resumes on the same model and the card says who raised it."""
    path = alices_budget(tmp_path)
    async with spend_running(fake_slack, fake_model, sqlite_url, path) as bot:
        await front.ask(bot, fake_slack, "first question")
        await front.ask(bot, fake_slack, "second question")
        (card,) = front.pause_cards(fake_slack)
        status, _ = await ask(bot, fake_slack, card, "UALICE", {"tokens": "20000"})
        assert status == 200
        bob = await card_in(fake_slack, "DBOB")
        assert "3,000 tokens" in shows(bob)
        assert "20,000 tokens" in shows(bob)
        asked_before = len(fake_model.requests)
        assert await bot.click(bob, cards.APPROVE, "UBOB", "DBOB") == 200
        await front.resumed(bot, fake_model, asked_before + 1)
        assert (await front.standing(bot)).limit_tokens == 20_000
        assert fake_model.requests[-1].body["model"] != "cheap-model"
        await wait_until(
            lambda: (
                "Raised to 20,000 tokens today by <@UBOB>" in shows(pause_card(fake_slack, card.ts))
            ),
            timeout=10,
        )
        assert len(fake_model.requests) == asked_before + 1
