"""Withdrawing a stopped turn's proposals on SQLite and PostgreSQL: two replicas handling the
same Stop at once withdraw each proposal once (one audit row), a proposal decided meanwhile
keeps its decision, and the turn never resumes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import func, select

from bot.approvals.machine import Event, State
from bot.approvals.service import ApprovalsService
from bot.db.migrate import upgrade_to_head
from bot.db.models import AuditEntry, ResumeRequest
from bot.db.session import Database
from tests.test_state_machine import make_proposal


@pytest.fixture
async def service(migrated_database_url: str) -> AsyncIterator[ApprovalsService]:
    db = Database.from_url(migrated_database_url)
    await upgrade_to_head(db)
    yield ApprovalsService(db)
    await db.dispose()


async def test_two_replicas_stopping_at_once_withdraw_once(service: ApprovalsService) -> None:
    proposal = await make_proposal(service)
    (turn,) = await service.open_turns("T", "C", "1.0")
    assert [p.id for p in turn.undecided] == [proposal.id]
    first, second = await asyncio.gather(
        service.stop_turn(turn, "UALICE"), service.stop_turn(turn, "UALICE")
    )
    assert len(first) + len(second) == 1
    assert (await service.get(proposal.id)).state is State.WITHDRAWN
    async with service.db.transaction() as session:
        withdrawals = await session.scalar(
            select(func.count()).select_from(AuditEntry).where(AuditEntry.event == "withdraw")
        )
        kinds = (await session.scalars(select(ResumeRequest.kind))).all()
    assert withdrawals == 1
    assert list(kinds) == ["stopped"], "marked stopped once, and no resume recorded"
    assert await service.open_turns("T", "C", "1.0") == []


async def test_a_proposal_approved_before_the_stop_keeps_its_decision(
    service: ApprovalsService,
) -> None:
    proposal = await make_proposal(service)
    (turn,) = await service.open_turns("T", "C", "1.0")
    await service.fire(proposal.id, Event.APPROVE, "UALICE")
    assert await service.stop_turn(turn, "UALICE") == []
    assert (await service.get(proposal.id)).state is State.APPROVED
    await service.fire(proposal.id, Event.START, "worker")
    await service.fire(proposal.id, Event.SUCCEED, "worker")  # the write finishes
    async with service.db.transaction() as session:
        kinds = (await session.scalars(select(ResumeRequest.kind))).all()
    assert list(kinds) == ["stopped"], "the finished write did not resume the stopped turn"
