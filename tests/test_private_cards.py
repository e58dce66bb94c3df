"""An approval card is a reply too: a write that carries a private channel's text is not carded
in a public thread. The card goes to the requester alone, the thread says so, and only people
who may read that text can decide on it (a crafted click from anyone else changes nothing)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import select

from bot.db.models import Proposal
from bot.slack import cards
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack
from tests.harness import RunningBot, make_settings, start_bot, stop_bot
from tests.test_approvals_flow import CREATE, call, card_text, tasks_in_db
from tests.test_audience import SECRET, private_exec, read_exec


@pytest.fixture
async def approvers_bot(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> AsyncIterator[RunningBot]:
    """Bob and Carol approve the board's writes; Carol is in #exec, Bob is not."""
    policies = {"tasks": {"approvers": ["UBOB", "UCAROL"]}}
    running = await start_bot(
        make_settings(fake_slack, fake_model, sqlite_url, approval_policies=policies)
    )
    yield running
    await stop_bot(running)


async def the_proposal(bot: RunningBot) -> Proposal:
    async with bot.countersign.db.transaction() as session:
        (proposal,) = (await session.scalars(select(Proposal))).all()
    return proposal


async def test_a_write_carrying_private_text_is_carded_to_the_requester_alone(
    approvers_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = approvers_bot
    private_exec(fake_slack)
    fake_slack.members["GEXEC"] = ["UALICE", "UCAROL", "UBOT"]
    fake_model.script(
        Script(tool_calls=[read_exec()]),
        Script(tool_calls=[call("create_task", CREATE | {"description": SECRET}, "w1")]),
        Script(text="Tracked."),
    )
    await bot.mention("C1", "read GEXEC and track what it says", fake_slack)
    await bot.idle()

    public = json.dumps(
        [(m.text, m.blocks) for m in fake_slack.channels["C1"]] + list(fake_slack.history.values())
    )
    assert SECRET not in public
    assert fake_slack.cards("C1") == []
    # Routed to the one approver who may read it (Carol), by DM; the thread names her.
    assert "Waiting for <@UCAROL> (notified by direct message)" in public
    assert fake_slack.cards("DALICE") == []
    assert fake_slack.cards("DBOB") == []
    (card,) = fake_slack.cards("DCAROL")
    assert SECRET in card_text(card)

    # Bob may approve tasks, but may not read #exec: his (crafted) clicks change nothing.
    for action in (cards.APPROVE, cards.DECLINE):
        assert await bot.click(card, action, "UBOB", "DCAROL") == 200
        await bot.idle()
        assert (await the_proposal(bot)).state.value == "proposed"
    assert any("may not read" in text for text in fake_slack.ephemerals_for("UBOB"))
    assert await tasks_in_db(bot) == []

    # Carol is in #exec and approves it.
    assert await bot.click(card, cards.APPROVE, "UCAROL", "DCAROL") == 200
    await bot.idle()
    (task,) = await tasks_in_db(bot)
    assert task.description == SECRET
    assert SECRET not in json.dumps([(m.text, m.blocks) for m in fake_slack.channels["C1"]])


async def test_without_approvers_the_private_card_goes_to_the_requester_who_decides(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    private_exec(fake_slack)
    fake_slack.members["GEXEC"] = ["UALICE", "UBOT"]
    fake_model.script(
        Script(tool_calls=[read_exec()]),
        Script(tool_calls=[call("create_task", CREATE | {"description": SECRET}, "w1")]),
        Script(text="Tracked."),
    )
    await bot.mention("C1", "read GEXEC and track what it says", fake_slack)
    await bot.idle()
    public = json.dumps([(m.text, m.blocks) for m in fake_slack.channels["C1"]])
    assert SECRET not in public
    assert "went to <@UALICE> privately" in public
    (card,) = fake_slack.cards("DALICE")
    assert await bot.click(card, cards.APPROVE, "UALICE", "DALICE") == 200
    await bot.idle()
    (task,) = await tasks_in_db(bot)
    assert task.description == SECRET


async def test_a_write_of_public_text_is_still_carded_in_its_thread(
    approvers_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Script(tool_calls=[call("create_task", CREATE, "w1")]))
    await approvers_bot.mention("C1", "track the login bug", fake_slack)
    await approvers_bot.idle()
    (card,) = fake_slack.cards("C1")
    assert "Fix login bug" in card_text(card)
    assert fake_slack.cards("DALICE") == []
