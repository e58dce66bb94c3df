"""Promise 1: an approval counts only for what the approver saw.

Each test attacks it the way a hostile teammate would: edit after the approver looked, edit and
approve one's own version under four-eyes, tamper with the stored arguments, craft buttons."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select, update

from bot.db.models import AuditEntry, Proposal, ProposalState
from bot.slack import cards
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack, StoredMessage
from tests.harness import RunningBot, make_settings, start_bot, stop_bot
from tests.test_approvals_flow import CREATE, call, card_text, proposals, tasks_in_db

EDITED = {"title": "Delete prod database", "priority": "urgent"}


async def propose(bot: RunningBot, slack: FakeSlack, model: FakeOpenAI, user: str) -> None:
    model.script(Script(tool_calls=[call("create_task", CREATE)]), Script(text="Resumed."))
    await bot.mention("C1", "track the login bug", slack, user=user)
    await bot.idle()


async def edit_as(bot: RunningBot, slack: FakeSlack, user: str, values: dict[str, str]) -> str:
    await bot.click(slack.cards("C1")[0], cards.EDIT, user, "C1")
    await bot.idle()
    status, answer = await bot.submit_view(slack.views[-1]["view"], user, values)
    assert status == 200
    await bot.idle()
    return answer


async def refused_reasons(bot: RunningBot) -> list[str]:
    async with bot.countersign.db.transaction() as session:
        rows = await session.scalars(select(AuditEntry).where(AuditEntry.event == "refused"))
        return [str((a.detail or {}).get("reason")) for a in rows.all()]


@pytest.fixture
async def reviewed_bot(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> AsyncIterator[RunningBot]:
    """Bob approves what Alice asks for; both may edit."""
    running = await start_bot(
        make_settings(
            fake_slack,
            fake_model,
            sqlite_url,
            approval_policies={"tasks": {"approvers": ["UBOB"]}},
        )
    )
    yield running
    await stop_bot(running)


async def test_approving_a_card_that_was_edited_since_changes_nothing(
    reviewed_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = reviewed_bot
    await propose(bot, fake_slack, fake_model, "UALICE")
    seen_by_bob = copy.deepcopy(fake_slack.cards("C1")[0])  # "Fix login bug", revision 1
    assert "Fix login bug" in card_text(seen_by_bob)
    await edit_as(bot, fake_slack, "UALICE", {**{k: str(v) for k, v in CREATE.items()}, **EDITED})
    (proposal,) = await proposals(bot)
    assert proposal.revision == 2
    assert proposal.arguments["title"] == "Delete prod database"

    await bot.click(seen_by_bob, cards.APPROVE, "UBOB", "C1")  # the old card's button
    await bot.idle()
    assert await tasks_in_db(bot) == []
    (proposal,) = await proposals(bot)
    assert proposal.state == ProposalState.PROPOSED
    told = fake_slack.ephemerals_for("UBOB")
    assert told
    assert "card changed" in told[-1]
    assert "the card changed" in await refused_reasons(bot)

    # Bob reads the new card and approves what it shows: that, and only that, runs.
    current = fake_slack.cards("C1")[0]
    assert "Delete prod database" in card_text(current)
    await bot.click(current, cards.APPROVE, "UBOB", "C1")
    await bot.idle()
    (task,) = await tasks_in_db(bot)
    assert task.title == "Delete prod database"


async def test_an_edit_voids_earlier_votes_and_is_audited_with_both_versions(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    bot = await start_bot(
        make_settings(
            fake_slack,
            fake_model,
            sqlite_url,
            approval_policies={"tasks": {"approvers": ["UBOB", "UCAROL"], "approvals_required": 2}},
        )
    )
    try:
        await propose(bot, fake_slack, fake_model, "UALICE")
        await bot.click(fake_slack.cards("C1")[0], cards.APPROVE, "UBOB", "C1")
        await bot.idle()
        assert await bot.countersign.approvals.approvers_of((await proposals(bot))[0].id) == [
            "UBOB"
        ]
        await edit_as(bot, fake_slack, "UALICE", {"title": "Delete prod database"})
        (proposal,) = await proposals(bot)
        assert await bot.countersign.approvals.approvers_of(proposal.id) == []
        # Carol's single vote on the new revision is not a quorum with Bob's void one.
        await bot.click(fake_slack.cards("C1")[0], cards.APPROVE, "UCAROL", "C1")
        await bot.idle()
        assert await tasks_in_db(bot) == []
        assert (await proposals(bot))[0].state == ProposalState.PROPOSED
        async with bot.countersign.db.transaction() as session:
            edit = (
                await session.scalars(select(AuditEntry).where(AuditEntry.event == "edit"))
            ).one()
        assert edit.detail is not None
        assert (edit.detail["before_revision"], edit.detail["revision"]) == (1, 2)
        assert edit.detail["before"]["title"] == "Fix login bug"
        assert edit.detail["after"]["title"] == "Delete prod database"
    finally:
        await stop_bot(bot)


async def test_under_four_eyes_an_editor_cannot_approve_their_own_version(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    bot = await start_bot(
        make_settings(
            fake_slack,
            fake_model,
            sqlite_url,
            approval_policies={"tasks": {"approvers": ["UBOB", "UCAROL"], "four_eyes": True}},
        )
    )
    try:
        await propose(bot, fake_slack, fake_model, "UALICE")
        await edit_as(bot, fake_slack, "UBOB", {"title": "Delete prod database"})
        await bot.click(fake_slack.cards("C1")[0], cards.APPROVE, "UBOB", "C1")
        await bot.idle()
        assert await tasks_in_db(bot) == []
        assert "you edited this action" in fake_slack.ephemerals_for("UBOB")[-1]
        # The service refuses it too, whatever the Slack layer checked.
        (proposal,) = await proposals(bot)
        with pytest.raises(Exception, match="last edited"):
            await bot.countersign.approvals.vote(proposal.id, proposal.revision, "UBOB", 1, True)
        await bot.click(fake_slack.cards("C1")[0], cards.APPROVE, "UCAROL", "C1")
        await bot.idle()
        (task,) = await tasks_in_db(bot)
        assert task.title == "Delete prod database"
    finally:
        await stop_bot(bot)


async def test_arguments_changed_after_approval_are_never_run(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """Even if the stored approved arguments (and their stored hash) were rewritten behind the
    service's back, the executor compares them with the hash recorded when the revision was
    made and with every vote, and refuses."""
    await propose(bot, fake_slack, fake_model, "UALICE")
    (proposal,) = await proposals(bot)
    approvals = bot.countersign.approvals
    await approvals.vote(proposal.id, proposal.revision, "UALICE", 1)
    from bot.tools.registry import arguments_hash

    forged = {**proposal.arguments, "title": "Delete prod database"}
    async with bot.countersign.db.transaction() as session:
        await session.execute(
            update(Proposal).values(approved_arguments=forged, approved_hash=arguments_hash(forged))
        )
    settled = await bot.countersign.executor.run(proposal.id)
    assert settled is not None
    assert settled.state == ProposalState.FAILED
    assert await tasks_in_db(bot) == []
    assert "differ from the approved revision" in (settled.error or "")
    await bot.idle()


BUTTONS = [cards.APPROVE, cards.DECLINE, cards.ASK_CHANGES, cards.EDIT, cards.RETRY]


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    value=st.one_of(
        st.text(max_size=60),
        st.integers().map(str),
        st.tuples(st.integers(), st.integers()).map(lambda t: f"{t[0]}:{t[1]}"),
        st.just("1:999"),
        st.just("99999999999999999999999:1"),
    ),
    action=st.sampled_from(BUTTONS),
)
async def test_crafted_buttons_change_nothing(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI, value: str, action: str
) -> None:
    if not await proposals(bot):
        await propose(bot, fake_slack, fake_model, "UALICE")
    before = [(p.state, p.version, p.revision) for p in await proposals(bot)]
    card = fake_slack.cards("C1")[0]
    crafted = StoredMessage(
        card.ts,
        card.text,
        card.user,
        card.bot_id,
        card.thread_ts,
        blocks=[{"type": "actions", "elements": [{"action_id": action, "value": value}]}],
    )
    assert await bot.click(crafted, action, "UALICE", "C1") == 200
    await bot.idle()
    after = [(p.state, p.version, p.revision) for p in await proposals(bot)]
    assert after == before
    assert await tasks_in_db(bot) == []


async def test_crafted_modal_submissions_change_nothing(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    await propose(bot, fake_slack, fake_model, "UALICE")
    before = [(p.state, p.version, p.revision) for p in await proposals(bot)]
    for metadata in ["", "x", "1:abc", "1:7", "-1", json.dumps({"id": 1})]:
        for callback in (cards.DECLINE_MODAL, cards.ASK_CHANGES_MODAL, cards.EDIT_MODAL):
            view: dict[str, Any] = {
                "type": "modal",
                "callback_id": callback,
                "private_metadata": metadata,
            }
            values = {"reason": "x", "note": "x", "title": "y"}
            status, answer = await bot.submit_view(view, "UALICE", values)
            assert status == 200
            assert json.loads(answer)["response_action"] == "errors"
    await bot.idle()
    assert [(p.state, p.version, p.revision) for p in await proposals(bot)] == before
