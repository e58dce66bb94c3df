"""Clicks that race, repeat, cross replicas and survive restarts: a write runs once, the turn
resumes once."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from sqlalchemy import ColumnElement, func, select, update

from bot.db.models import AuditEntry, Base, Proposal, ProposalState, ResumeRequest, utcnow
from bot.slack import cards
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack, wait_until
from tests.harness import RunningBot, make_settings, start_bot, stop_bot
from tests.test_approvals_flow import CREATE, call, card_text, proposals, tasks_in_db


async def count(bot: RunningBot, model: type[Base], *where: ColumnElement[bool]) -> int:
    async with bot.countersign.db.transaction() as session:
        found = await session.scalar(select(func.count()).select_from(model).where(*where))
    return int(found or 0)


async def click_storm(bots: list[RunningBot], slack: FakeSlack, clicks: int) -> None:
    # The turn that posts the card may not have begun when `idle` first looks (a loaded
    # machine): the storm is about the clicks, so it waits for the card.
    await wait_until(lambda: bool(slack.cards("C1")), timeout=10)
    card = slack.cards("C1")[0]
    attempts = [
        bots[i % len(bots)].click(card, cards.APPROVE, "UALICE", "C1") for i in range(clicks)
    ]
    attempts += [
        bots[i % len(bots)].click(card, cards.APPROVE, "UALICE", "C1") for i in range(clicks // 5)
    ]  # deliveries repeated, as retries are
    assert set(await asyncio.gather(*attempts)) == {200}
    for bot in bots:
        await bot.idle()


async def assert_once(bot: RunningBot, slack: FakeSlack, model: FakeOpenAI) -> None:
    assert len(await tasks_in_db(bot)) == 1
    assert await count(bot, AuditEntry, AuditEntry.event == "start") == 1
    assert await count(bot, AuditEntry, AuditEntry.event == "approve") == 1
    assert await count(bot, ResumeRequest) == 1
    assert len(model.requests) == 2  # the first turn and exactly one resume
    assert [m.text for m in slack.bot_messages("C1")].count("Resumed once.") == 1


async def proposal_then_stop(
    slack: FakeSlack,
    model: FakeOpenAI,
    migrated_database_url: str,
    state: ProposalState,
    **values: object,
) -> None:
    """A bot proposes create_task; the proposal is then approved (and maybe further along,
    per `state` and `values`) when the process stops, as if it died there."""
    bot = await start_bot(make_settings(slack, model, migrated_database_url))
    await bot.mention("C1", "track it", slack)
    await bot.idle()
    (proposal,) = await proposals(bot)
    # A real approval (vote row and all), then the state the process died in.
    await bot.countersign.approvals.vote(proposal.id, proposal.revision, "UALICE", 1)
    async with bot.countersign.db.transaction() as session:
        await session.execute(
            update(Proposal).values(state=state, version=Proposal.version + 1, **values)
        )
    await stop_bot(bot)


async def test_fifty_concurrent_clicks_on_sqlite_execute_and_resume_once(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(
        Script(tool_calls=[call("create_task", CREATE)]), Script(text="Resumed once.")
    )
    await bot.mention("C1", "track it", fake_slack)
    await bot.idle()
    await click_storm([bot], fake_slack, 50)
    await assert_once(bot, fake_slack, fake_model)
    said = fake_slack.ephemerals_for("UALICE")
    assert len(said) >= 50  # every losing click heard why nothing happened
    assert all("already" in text for text in said)


async def test_fifty_clicks_across_two_instances_on_postgres(
    migrated_postgres_url: str, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(
        Script(tool_calls=[call("create_task", CREATE)]), Script(text="Resumed once.")
    )
    first = await start_bot(make_settings(fake_slack, fake_model, migrated_postgres_url))
    second = await start_bot(make_settings(fake_slack, fake_model, migrated_postgres_url))
    try:
        await first.mention("C1", "track it", fake_slack)
        await first.idle()
        await click_storm([first, second], fake_slack, 50)
        await assert_once(first, fake_slack, fake_model)
    finally:
        await stop_bot(first)
        await stop_bot(second)


async def test_siblings_settling_at_once_on_two_instances_resume_once(
    migrated_postgres_url: str, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    two = [
        call("create_task", CREATE, "c1"),
        call("create_task", {**CREATE, "title": "Second"}, "c2"),
    ]
    fake_model.script(Script(tool_calls=two), Script(text="Resumed once."))
    first = await start_bot(make_settings(fake_slack, fake_model, migrated_postgres_url))
    second = await start_bot(make_settings(fake_slack, fake_model, migrated_postgres_url))
    try:
        await first.mention("C1", "track both", fake_slack)
        await first.idle()
        card_a, card_b = fake_slack.cards("C1")
        await asyncio.gather(
            first.click(card_a, cards.APPROVE, "UALICE", "C1"),
            second.click(card_b, cards.DECLINE, "UALICE", "C1"),
        )
        await first.idle()
        await second.idle()
        modal = fake_slack.views[-1]["view"]
        first_id = (await proposals(first))[0].id
        await asyncio.gather(
            second.submit_view(modal, "UALICE", {"reason": "not now"}),
            first.click_value(first_id, cards.APPROVE, "UALICE", "C1", fake_slack),
        )
        await first.idle()
        await second.idle()
        states = sorted(p.state.value for p in await proposals(first))
        assert states == ["declined", "succeeded"]
        assert await count(first, ResumeRequest) == 1
        assert len(fake_model.requests) == 2
        tools = [m for m in fake_model.requests[-1].body["messages"] if m["role"] == "tool"]
        assert [m["tool_call_id"] for m in tools] == ["c1", "c2"]  # stored in call order
    finally:
        await stop_bot(first)
        await stop_bot(second)


async def test_a_restart_between_proposal_and_click(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    fake_model.script(
        Script(tool_calls=[call("create_task", CREATE)]), Script(text="Resumed once.")
    )
    before = await start_bot(make_settings(fake_slack, fake_model, sqlite_url))
    await before.mention("C1", "track it", fake_slack)
    await before.idle()
    await stop_bot(before)
    after = await start_bot(make_settings(fake_slack, fake_model, sqlite_url))
    try:
        await after.click(fake_slack.cards("C1")[0], cards.APPROVE, "UALICE", "C1")
        await after.idle()
        await assert_once(after, fake_slack, fake_model)
    finally:
        await stop_bot(after)


async def test_a_crash_during_execution_is_interrupted_then_retry_works(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    fake_model.script(
        Script(tool_calls=[call("create_task", CREATE)]),
        Script(text="It was interrupted."),
        Script(text="Now it is done."),
    )
    # Approved and executing when the process died.
    await proposal_then_stop(
        fake_slack,
        fake_model,
        sqlite_url,
        ProposalState.EXECUTING,
        lease_owner="another-host/999999/dead",
        lease_expires_at=utcnow() - timedelta(seconds=1),
        attempts=1,
    )

    restarted = await start_bot(make_settings(fake_slack, fake_model, sqlite_url))
    try:
        await restarted.idle()
        (interrupted,) = await proposals(restarted)
        assert interrupted.state == ProposalState.UNKNOWN  # the write may have run
        assert interrupted.error is not None
        assert interrupted.error.startswith("interrupted")
        shown = card_text(fake_slack.cards("C1")[0])
        assert "Outcome unknown" in shown
        assert "may have run" in shown
        assert cards.RETRY in shown
        await restarted.click(fake_slack.cards("C1")[0], cards.RETRY, "UALICE", "C1")
        await restarted.idle()
        (done,) = await proposals(restarted)
        assert done.state == ProposalState.SUCCEEDED
        assert len(await tasks_in_db(restarted)) == 1
        assert "Done" in card_text(fake_slack.cards("C1")[0])
        texts = [m.text for m in fake_slack.bot_messages("C1")]
        assert "It was interrupted." in texts
        assert "Now it is done." in texts
        last = fake_model.requests[-1].body["messages"]
        assert any(m["role"] == "system" and "retried" in m["content"] for m in last)
    finally:
        await stop_bot(restarted)


async def test_proposals_left_approved_are_executed_at_start_up(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    fake_model.script(
        Script(tool_calls=[call("create_task", CREATE)]), Script(text="Resumed once.")
    )
    await proposal_then_stop(fake_slack, fake_model, sqlite_url, ProposalState.APPROVED)
    after = await start_bot(make_settings(fake_slack, fake_model, sqlite_url))
    try:
        await after.idle()
        (done,) = await proposals(after)
        assert done.state == ProposalState.SUCCEEDED
        assert len(await tasks_in_db(after)) == 1
        assert "Resumed once." in [m.text for m in fake_slack.bot_messages("C1")]
    finally:
        await stop_bot(after)
