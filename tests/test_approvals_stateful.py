"""A stateful property test of the approvals core: two workers on one database (SQLite and
PostgreSQL) and random interleavings of vote (on the card a person saw, which may be stale),
edit, decline, ask for changes, expire, start, lease lapse, crash, interrupt and retry.

Invariants, checked after every step:
- nothing is approved, or runs, without the required distinct votes of its exact revision, by
  people other than its requester and its last editor (four-eyes), with that revision's
  arguments;
- no two workers record an outcome for one attempt, and only the lease holder records at all;
- a turn whose proposals are all settled has exactly one resume, an unsettled one none.
"""

from __future__ import annotations

import asyncio
import tempfile
from contextlib import AbstractAsyncContextManager, suppress
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from sqlalchemy import delete, func, select, update

from bot.approvals.machine import SETTLED
from bot.approvals.service import (
    ApprovalError,
    ApprovalsService,
    LeaseLost,
)
from bot.db import repositories as repo
from bot.db.migrate import upgrade_to_head
from bot.db.models import (
    AuditEntry,
    Base,
    Proposal,
    ProposalApproval,
    ResumeRequest,
    Role,
    utcnow,
)
from bot.db.session import Database
from bot.states import State
from bot.tools.registry import Change, Outcome, Preview
from tests.pg import temporary_database

REQUESTER = "UREQ"
PEOPLE = [REQUESTER, "U1", "U2", "U3"]
REQUIRED = [2, 1]  # approvals each of the turn's two proposals needs
WORKERS = ["host/1/a", "host/2/b"]


async def reset(db: Database) -> list[int]:
    """Empty tables, then one paused turn with two proposals; returns their ids."""
    async with db.transaction() as session:
        for table in reversed(Base.metadata.sorted_tables):
            await session.execute(delete(table))
    service = ApprovalsService(db)
    ids = []
    async with db.transaction() as session:
        conversation, _ = await repo.get_or_create_conversation(session, "T", "C", "1.0", REQUESTER)
        calls = [
            {"id": f"c{i}", "type": "function", "function": {"name": "t", "arguments": "{}"}}
            for i in range(2)
        ]
        assistant = await repo.add_message(
            session, conversation, Role.ASSISTANT, None, tool_calls=calls
        )
        for i in range(2):
            result = await repo.add_message(
                session, conversation, Role.TOOL, None, tool_call_id=f"c{i}", tool_name="t"
            )
            proposal = await service.propose(
                session,
                team_id="T",
                conversation_id=conversation.id,
                assistant_message_id=assistant.id,
                result_message_id=result.id,
                tool_call_id=f"c{i}",
                tool_name="t",
                arguments={"title": f"v1-{i}"},
                preview=Preview("t", (Change("title", None, f"v1-{i}"),)),
                requester=REQUESTER,
                channel_id="C",
                thread_ts="1.0",
                expires_in=timedelta(hours=1),
            )
            ids.append(proposal.id)
    return ids


def machine(url: str, loop: asyncio.AbstractEventLoop) -> type[RuleBasedStateMachine]:
    db = Database.from_url(url)
    loop.run_until_complete(upgrade_to_head(db))
    # Two workers: two services on two engines, as two processes would have.
    engines = [db, Database.from_url(url)]

    class Approvals(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.ids = loop.run_until_complete(reset(db))
            self.services = [ApprovalsService(e, lease_seconds=60) for e in engines]
            self.arguments: dict[tuple[int, int], dict[str, Any]] = {
                (pid, 1): {"title": f"v1-{i}"} for i, pid in enumerate(self.ids)
            }
            self.handles: dict[int, tuple[int, Proposal]] = {}  # proposal -> (worker, claim)
            self.recorded: set[tuple[int, int]] = set()  # (proposal, attempt) with an outcome
            self.clicks: set[tuple[int, str, int]] = set()  # (proposal, user, revision seen)
            self.was_settled = False  # every proposal of the turn was settled at some point

        def run(self, coro: Any) -> Any:
            return loop.run_until_complete(coro)

        def current(self, index: int) -> Proposal:
            proposal: Proposal = self.run(self.services[0].get(self.ids[index]))
            return proposal

        @rule(
            worker=st.integers(0, 1),
            index=st.integers(0, 1),
            user=st.sampled_from(PEOPLE),
            stale=st.booleans(),
        )
        def vote(self, worker: int, index: int, user: str, stale: bool) -> None:
            proposal = self.current(index)
            seen = max(1, proposal.revision - 1) if stale else proposal.revision
            self.clicks.add((proposal.id, user, seen))
            with suppress(ApprovalError):
                self.run(self.services[worker].vote(proposal.id, seen, user, REQUIRED[index], True))

        @rule(worker=st.integers(0, 1), index=st.integers(0, 1), user=st.sampled_from(PEOPLE))
        def edit(self, worker: int, index: int, user: str) -> None:
            proposal = self.current(index)
            new = {"title": f"v{proposal.revision + 1}-{index}-{user}"}
            try:
                edited = self.run(
                    self.services[worker].edit(
                        proposal.id, user, new, Preview("t"), proposal.revision
                    )
                )
            except ApprovalError:
                return
            self.arguments[(edited.id, edited.revision)] = new

        @rule(worker=st.integers(0, 1), index=st.integers(0, 1), user=st.sampled_from(PEOPLE))
        def decline(self, worker: int, index: int, user: str) -> None:
            proposal = self.current(index)
            with suppress(ApprovalError):
                self.run(self.services[worker].decline(proposal.id, user, "no", proposal.revision))

        @rule(worker=st.integers(0, 1), index=st.integers(0, 1), user=st.sampled_from(PEOPLE))
        def ask_changes(self, worker: int, index: int, user: str) -> None:
            proposal = self.current(index)
            service = self.services[worker]
            with suppress(ApprovalError):
                self.run(service.ask_changes(proposal.id, user, "smaller", proposal.revision))

        @rule(worker=st.integers(0, 1), index=st.integers(0, 1))
        def expire(self, worker: int, index: int) -> None:
            async def go() -> None:
                async with db.transaction() as session:
                    await session.execute(
                        update(Proposal)
                        .where(Proposal.id == self.ids[index])
                        .values(expires_at=utcnow() - timedelta(seconds=1))
                    )
                await self.services[worker].expire_due()

            self.run(go())

        @rule(worker=st.integers(0, 1), index=st.integers(0, 1), retry=st.booleans())
        def start(self, worker: int, index: int, retry: bool) -> None:
            pid = self.ids[index]
            try:
                claim = self.run(
                    self.services[worker].start(pid, WORKERS[worker], "U1" if retry else None)
                )
            except ApprovalError:
                return
            # The claim runs exactly the approved revision's arguments.
            arguments = self.run(self.services[worker].approved_call(claim))
            assert arguments == self.arguments[(pid, claim.approved_revision)]
            self.handles[pid] = (worker, claim)

        @precondition(lambda self: bool(self.handles))
        @rule(data=st.data(), ok=st.booleans())
        def finish(self, data: st.DataObject, ok: bool) -> None:
            pid = data.draw(st.sampled_from(sorted(self.handles)))
            worker, claim = self.handles.pop(pid)
            service = self.services[worker]
            try:
                if ok:
                    self.run(service.succeed(claim, WORKERS[worker], Outcome({}, "done")))
                else:
                    self.run(service.fail(claim, WORKERS[worker], "boom"))
            except LeaseLost:
                return
            key = (pid, claim.attempts)
            assert key not in self.recorded, "two outcomes for one attempt"
            self.recorded.add(key)

        @rule(index=st.integers(0, 1))
        def lapse(self, index: int) -> None:
            async def go() -> None:
                async with db.transaction() as session:
                    await session.execute(
                        update(Proposal)
                        .where(Proposal.id == self.ids[index], Proposal.lease_owner.is_not(None))
                        .values(lease_expires_at=utcnow() - timedelta(seconds=1))
                    )

            self.run(go())

        @rule(worker=st.integers(0, 1))
        def interrupt(self, worker: int) -> None:
            self.run(self.services[worker].interrupt_lapsed())

        @rule(worker=st.integers(0, 1))
        def crash(self, worker: int) -> None:
            """The worker dies: its claims never finish (their leases will lapse)."""
            self.handles = {p: h for p, h in self.handles.items() if h[0] != worker}

        @invariant()
        def approvals_are_for_what_was_seen(self) -> None:
            async def check() -> None:
                async with db.transaction() as session:
                    for index, pid in enumerate(self.ids):
                        proposal = await session.get(Proposal, pid, populate_existing=True)
                        assert proposal is not None
                        if proposal.approved_revision is None:
                            assert State(proposal.state) in (
                                State.PROPOSED,
                                State.DECLINED,
                                State.CHANGES_ASKED,
                                State.EXPIRED,
                            )
                            continue
                        votes = (
                            await session.scalars(
                                select(ProposalApproval).where(ProposalApproval.proposal_id == pid)
                            )
                        ).all()
                        voters = {v.approver for v in votes}
                        # Every vote on record is a click on the revision its voter saw.
                        assert all((pid, v.approver, v.revision) in self.clicks for v in votes)
                        assert all(v.revision == proposal.approved_revision for v in votes)
                        assert len(voters) >= REQUIRED[index]
                        assert REQUESTER not in voters
                        assert proposal.revised_by not in voters
                        expected = self.arguments[(pid, proposal.approved_revision)]
                        assert proposal.approved_arguments == expected

            self.run(check())

        @invariant()
        def a_settled_turn_resumes_exactly_once(self) -> None:
            async def check() -> None:
                async with db.transaction() as session:
                    states = (
                        await session.scalars(
                            select(Proposal.state).where(Proposal.id.in_(self.ids))
                        )
                    ).all()
                    resumes = await session.scalar(
                        select(func.count())
                        .select_from(ResumeRequest)
                        .where(ResumeRequest.kind == "resume")
                    )
                    audits = await session.scalar(select(func.count()).select_from(AuditEntry))
                if all(State(s) in SETTLED for s in states):
                    self.was_settled = True
                # Once every proposal settled the turn resumed, exactly once; a Retry reopening
                # a proposal afterwards reaches the model as an update, not a second resume.
                assert resumes == (1 if self.was_settled else 0)
                assert audits  # every proposal was audited

            self.run(check())

    return Approvals


def run(
    url_context: AbstractAsyncContextManager[str] | None, sqlite: Path | None, examples: int
) -> None:
    loop = asyncio.new_event_loop()
    try:
        context = url_context
        url = f"sqlite:///{sqlite}" if sqlite else loop.run_until_complete(context.__aenter__())  # type: ignore[union-attr]
        try:
            run_state_machine_as_test(
                machine(url, loop),
                settings=settings(
                    max_examples=examples,
                    stateful_step_count=30,
                    deadline=None,
                    suppress_health_check=list(HealthCheck),
                ),
            )
        finally:
            if context is not None:
                loop.run_until_complete(context.__aexit__(None, None, None))
    finally:
        loop.close()


def test_approvals_core_on_sqlite() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run(None, Path(tmp) / "stateful.db", examples=40)


@pytest.mark.postgres
def test_approvals_core_on_postgres() -> None:
    run(temporary_database(), None, examples=25)
