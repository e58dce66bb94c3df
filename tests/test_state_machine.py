"""Every (state, event) pair of the transition table, on SQLite and PostgreSQL: allowed ones
move and leave an audit row; forbidden ones raise a clear error and change nothing."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from bot.approvals.machine import TRANSITIONS, Event, State, TransitionNotAllowed, transition
from bot.approvals.service import AlreadyHandled, ApprovalsService
from bot.db import repositories as repo
from bot.db.migrate import upgrade_to_head
from bot.db.models import AuditEntry, Proposal, ProposalState, ResumeRequest, Role
from bot.db.session import Database
from bot.tools.registry import Change, Preview

ALLOWED = {(t.source, t.event): t.target for t in TRANSITIONS}
PAIRS = list(itertools.product(State, Event))


@pytest.fixture
async def service(migrated_database_url: str) -> AsyncIterator[ApprovalsService]:
    db = Database.from_url(migrated_database_url)
    await upgrade_to_head(db)
    yield ApprovalsService(db)
    await db.dispose()


async def make_proposal(service: ApprovalsService, state: State = State.PROPOSED) -> Proposal:
    async with service.db.transaction() as session:
        conversation, _ = await repo.get_or_create_conversation(session, "T", "C", "1.0", "UA")
        call = {
            "id": "call_1",
            "type": "function",
            "function": {"name": "create_task", "arguments": "{}"},
        }
        assistant = await repo.add_message(
            session, conversation, Role.ASSISTANT, None, tool_calls=[call]
        )
        tool_message = await repo.add_message(
            session, conversation, Role.TOOL, None, tool_call_id="call_1", tool_name="create_task"
        )
        proposal = await service.propose(
            session,
            team_id="T",
            conversation_id=conversation.id,
            assistant_message_id=assistant.id,
            result_message_id=tool_message.id,
            tool_call_id="call_1",
            tool_name="create_task",
            arguments={"title": "x"},
            preview=Preview("Create task 'x'", (Change("title", None, "x"),)),
            requester="UA",
            channel_id="C",
            thread_ts="1.0",
            expires_in=timedelta(minutes=15),
        )
        proposal.state = ProposalState(state.value)
    return proposal


def test_the_table_is_the_one_in_design_md() -> None:
    rows = {(t.source.value, t.event.value, t.target.value) for t in TRANSITIONS}
    assert rows == {
        ("proposed", "approve", "approved"),
        ("proposed", "decline", "declined"),
        ("proposed", "ask_changes", "changes_asked"),
        ("proposed", "expire", "expired"),
        ("proposed", "withdraw", "withdrawn"),
        ("proposed", "escalate_deny", "expired"),
        ("proposed", "escalate_allow", "approved"),
        ("proposed", "policy_deny", "declined"),  # the policy in force denies what waits
        ("approved", "start", "executing"),
        ("executing", "succeed", "succeeded"),
        ("executing", "fail", "failed"),
        ("executing", "lose", "unknown"),
        ("failed", "retry", "executing"),
        ("unknown", "retry", "executing"),
        ("executing", "interrupt", "unknown"),
    }


@pytest.mark.parametrize(("state", "event"), PAIRS, ids=[f"{s}-{e}" for s, e in PAIRS])
async def test_every_state_event_pair(
    service: ApprovalsService, state: State, event: Event
) -> None:
    proposal = await make_proposal(service, state)
    async with service.db.transaction() as session:
        audit_before = await session.scalar(select(func.count()).select_from(AuditEntry))
    target = ALLOWED.get((state, event))
    if target is None:
        with pytest.raises(TransitionNotAllowed) as caught:
            await service.fire(proposal.id, event, "tester")
        assert str(caught.value) == f"cannot {event.value} a proposal that is {state.value}"
        after = await service.get(proposal.id)
        assert after.state.value == state.value
        assert after.version == proposal.version
        async with service.db.transaction() as session:
            assert await session.scalar(select(func.count()).select_from(AuditEntry)) == (
                audit_before
            )
        return
    moved = await service.fire(proposal.id, event, "tester")
    assert moved.state.value == target.value
    assert moved.version == proposal.version + 1
    async with service.db.transaction() as session:
        last = (await session.scalars(select(AuditEntry).order_by(AuditEntry.id.desc()))).first()
        resumes = await session.scalar(select(func.count()).select_from(ResumeRequest))
    assert last is not None
    assert (last.from_state, last.to_state, last.event, last.actor) == (
        state.value,
        target.value,
        event.value,
        "tester",
    )
    # The only proposal of its turn: settling it records exactly one resume (a withdrawal
    # comes from a Stop, and a stopped turn never resumes).
    assert resumes == (
        1
        if target
        in {
            State.SUCCEEDED,
            State.DECLINED,
            State.CHANGES_ASKED,
            State.EXPIRED,
            State.FAILED,
            State.UNKNOWN,
        }
        else 0
    )


async def test_a_stale_version_loses_the_compare_and_set(service: ApprovalsService) -> None:
    proposal = await make_proposal(service)
    await service.fire(proposal.id, Event.APPROVE, "first")
    async with service.db.transaction() as session:
        stale = await session.get(Proposal, proposal.id)
        assert stale is not None
        stale.state, stale.version = ProposalState.PROPOSED, proposal.version
        session.expunge(stale)
        with pytest.raises(AlreadyHandled):
            await service._apply(session, stale, Event.APPROVE, "second")


def test_transition_lookup_matches_the_table() -> None:
    for t in TRANSITIONS:
        assert transition(t.source, t.event) is t
