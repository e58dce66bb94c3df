"""Promise 2: a write runs at most once per attempt, with the approved arguments.

Two workers share one database (SQLite and PostgreSQL). A live lease is never taken over, from
this host or any other; a lapsed one is; only the holder records an outcome; the heartbeat keeps
a lease alive through work longer than the lease itself."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta

import pytest
from pydantic import BaseModel
from sqlalchemy import update

from bot.approvals.executor import Executor
from bot.approvals.service import ApprovalsService, LeaseLost, NeedsConfirmation
from bot.db.migrate import upgrade_to_head
from bot.db.models import Proposal, ProposalState, utcnow
from bot.db.session import Database
from bot.tools.catalog import ToolRegistry
from bot.tools.registry import Change, Outcome, Preview, ToolContext, write_tool
from tests.test_crash_matrix import eventually
from tests.test_state_machine import make_proposal


class Args(BaseModel):
    title: str


RUNS: list[str] = []
DELAYS = {"preview": 0.3, "run": 0.45}


async def slow_preview(args: Args, ctx: ToolContext) -> Preview:
    await asyncio.sleep(DELAYS["preview"])
    return Preview(f"Create task '{args.title}'", (Change("title", None, args.title),))


@write_tool("create_task", "slow create", Args, preview=slow_preview)
async def slow_create(args: Args, ctx: ToolContext) -> Outcome:
    await asyncio.sleep(DELAYS["run"])
    RUNS.append(str(ctx.idempotency_key))
    return Outcome({"ok": True}, "created")


class NoCards:
    def refresh(self, proposal_id: int) -> None:
        return None


@pytest.fixture
async def db(migrated_database_url: str) -> AsyncIterator[Database]:
    database = Database.from_url(migrated_database_url)
    await upgrade_to_head(database)
    yield database
    await database.dispose()


def executor(approvals: ApprovalsService, worker: str, timeout: float) -> Executor:
    def context(proposal: Proposal) -> ToolContext:
        return ToolContext(
            db=approvals.db,
            slack=None,  # type: ignore[arg-type]
            team_id="T",
            channel_id="C",
            requester="UA",
            idempotency_key=proposal.idempotency_key,
        )

    return Executor(
        approvals, ToolRegistry([slow_create]), NoCards(), context, lambda: None, worker, timeout
    )


async def approved(approvals: ApprovalsService) -> Proposal:
    proposal = await make_proposal(approvals)
    await approvals.vote(proposal.id, proposal.revision, "UA", 1)
    return proposal


async def test_a_worker_that_cannot_renew_its_lease_stops_the_tool_before_it_lapses(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The database is unreachable for worker A's renewals: A stops its tool before its 3 s
    lease lapses, so when a sweeping worker B finds the lease lapsed, nothing of A still runs
    and nothing is written after the lapse. (It used to log and go on: A's tool wrote after B
    had already taken the work over.) The fence stops the tool 2.5 s after the claim, 0.45 s
    before the tool's own deadline and at least 0.5 s before the lease lapses: a loaded
    machine's late timers do not reorder them (a 0.6 s lease left 50 ms, and failed so)."""
    RUNS.clear()
    monkeypatch.setitem(DELAYS, "run", 10.0)  # the tool would run past the lease
    with pytest.raises(ValueError, match="longer than the tool timeout"):
        executor(ApprovalsService(db, lease_seconds=0.5), "w", timeout=0.5)
    a = ApprovalsService(db, lease_seconds=3.0)
    b = ApprovalsService(db, lease_seconds=3.0)

    async def unreachable(proposal: Proposal, worker: str) -> bool:
        raise ConnectionRefusedError("the database is unreachable")

    a.renew = unreachable  # type: ignore[method-assign]
    proposal = await approved(a)
    run = asyncio.create_task(executor(a, "worker-a", timeout=2.95).run(proposal.id))
    taken_while_running = []
    while not run.done():
        taken_while_running += await b.interrupt_lapsed()
        await asyncio.sleep(0.05)
    assert await run is None  # A stopped and recorded nothing
    assert taken_while_running == []
    assert RUNS == []
    taken: list[Proposal] = []  # once lapsed, B takes it over: the outcome is unknown

    async def lapsed() -> bool:
        taken.extend(await b.interrupt_lapsed())
        return bool(taken)

    await until(lapsed)
    assert [p.state for p in taken] == [ProposalState.UNKNOWN]
    assert RUNS == []


async def until(check: Callable[[], Awaitable[bool]], timeout: float = 30) -> None:
    """Wait on a condition the database answers (a generous bound, only for a hang)."""
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, "the condition never held"
        await asyncio.sleep(0.05)


async def test_a_live_lease_is_never_interrupted_by_another_worker(db: Database) -> None:
    first = ApprovalsService(db, lease_seconds=30)
    second = ApprovalsService(db, lease_seconds=30)
    proposal = await approved(first)
    started = await first.start(proposal.id, "same-host/1/a")
    # A second process starting up on the same host, or any sweep, leaves it alone.
    assert await second.interrupt_lapsed() == []
    assert (await second.get(proposal.id)).state == ProposalState.EXECUTING
    settled = await first.succeed(started, "same-host/1/a", Outcome({}, "done"))
    assert settled.state == ProposalState.SUCCEEDED


async def test_a_lapsed_lease_is_interrupted_and_its_holder_cannot_record_after(
    db: Database,
) -> None:
    first = ApprovalsService(db, lease_seconds=30)
    second = ApprovalsService(db, lease_seconds=30)
    proposal = await approved(first)
    started = await first.start(proposal.id, "host-a/1/a")
    async with db.transaction() as session:
        await session.execute(
            update(Proposal).values(lease_expires_at=utcnow() - timedelta(seconds=1))
        )
    (interrupted,) = await second.interrupt_lapsed()
    assert interrupted.state == ProposalState.UNKNOWN  # the write may have run
    assert (interrupted.error or "").startswith("interrupted")
    assert "may have run" in (interrupted.error or "")
    with pytest.raises(LeaseLost):
        await first.succeed(started, "host-a/1/a", Outcome({}, "done"))
    with pytest.raises(LeaseLost):
        await first.fail(started, "host-a/1/a", "boom")
    assert (await second.get(proposal.id)).state == ProposalState.UNKNOWN


async def test_only_the_lease_holder_records_the_outcome(db: Database) -> None:
    approvals = ApprovalsService(db, lease_seconds=30)
    proposal = await approved(approvals)
    started = await approvals.start(proposal.id, "holder")
    with pytest.raises(LeaseLost):
        await approvals.succeed(started, "somebody-else", Outcome({}, "done"))
    assert (await approvals.get(proposal.id)).state == ProposalState.EXECUTING


async def test_the_re_read_and_the_run_share_one_deadline_inside_the_lease(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Preview re-read (0.6 s) + tool (0.95 s) would outlast a 1.5 s lease if each had its own
    1 s time-out (it used to: the work then lived past the lease only as long as renewals
    kept succeeding, and the write completed). One deadline for both stops the tool at 1 s,
    inside the lease: the write never completes, the outcome is unknown (the request may have
    gone out), and a sweeping second worker never finds it lapsed while it runs (renewed every
    0.5 s). Shown by what happened, not by the clock: a loaded machine may take longer."""
    RUNS.clear()
    monkeypatch.setitem(DELAYS, "preview", 0.6)
    monkeypatch.setitem(DELAYS, "run", 0.95)
    approvals = ApprovalsService(db, lease_seconds=1.5)
    sweeper = ApprovalsService(db, lease_seconds=1.5)
    proposal = await approved(approvals)
    run = asyncio.create_task(executor(approvals, "worker-a", timeout=1.0).run(proposal.id))
    interrupted = []
    while not run.done():
        interrupted += await sweeper.interrupt_lapsed()
        await asyncio.sleep(0.05)
    settled = await run
    assert interrupted == []
    assert settled is not None
    assert settled.state == ProposalState.UNKNOWN
    assert "did not finish in time" in (settled.error or "")
    assert RUNS == []  # with a time-out each, the preview and the run both finished: a write


async def test_a_retry_passes_the_same_idempotency_key(db: Database) -> None:
    RUNS.clear()
    approvals = ApprovalsService(db, lease_seconds=5)
    proposal = await approved(approvals)
    worker = executor(approvals, "worker-a", timeout=2)
    started = await approvals.start(proposal.id, "crashed")
    async with db.transaction() as session:
        await session.execute(
            update(Proposal).values(lease_expires_at=utcnow() - timedelta(seconds=1))
        )
    await approvals.interrupt_lapsed()
    # The crash left the outcome unknown and this tool cannot look for its earlier write: the
    # retry runs only once its clicker confirmed that it may write twice.
    with pytest.raises(NeedsConfirmation):
        await worker.run(proposal.id, retry_by="UA")
    assert RUNS == []
    settled = await worker.run(proposal.id, retry_by="UA", confirmed=True)
    assert settled is not None
    assert settled.state == ProposalState.SUCCEEDED
    assert [started.idempotency_key] == RUNS
    assert settled.attempts == 2


async def test_a_card_claim_lasts_its_own_time_not_the_proposals_age(db: Database) -> None:
    """Two replicas' sweepers re-posting the card of a proposal made minutes ago: the first
    claim holds (it used to count as stale at once, because the proposal was over 60 s old,
    and the second sweeper posted a second card); a lapsed claim is taken over, and says so."""
    one, two = ApprovalsService(db), ApprovalsService(db)
    proposal = await make_proposal(one)
    async with db.transaction() as session:
        await session.execute(update(Proposal).values(created_at=utcnow() - timedelta(minutes=10)))
    first = await one.claim_card(proposal.id)
    assert first is not None
    assert not first.takeover
    assert await two.claim_card(proposal.id) is None
    async with db.transaction() as session:  # the first poster died; its claim ran out
        await session.execute(
            update(Proposal).values(card_claimed_until=utcnow() - timedelta(seconds=1))
        )
    second = await two.claim_card(proposal.id)
    assert second is not None
    assert second.takeover
    assert await one.claim_card(proposal.id) is None
    await two.set_card(proposal.id, "C1", "1.000001")
    assert await one.claim_card(proposal.id) is None  # posted: nobody claims it again


async def test_a_retry_after_the_turn_resumed_is_an_update_not_a_second_resume(
    db: Database,
) -> None:
    """Found by the stateful test: an execution interrupted by a lapsed lease settles the turn
    (it resumes once); a Retry reopens the proposal, and its outcome reaches the model as an
    update of that turn, never as a second resume."""
    from sqlalchemy import func, select

    from bot.db.models import ResumeRequest

    approvals = ApprovalsService(db, lease_seconds=30)
    proposal = await approved(approvals)
    await approvals.start(proposal.id, "crashed")
    async with db.transaction() as session:
        await session.execute(
            update(Proposal).values(lease_expires_at=utcnow() - timedelta(seconds=1))
        )
    assert [p.id for p in await approvals.interrupt_lapsed()] == [proposal.id]

    async def requests() -> list[str]:
        async with db.transaction() as session:
            kinds = await session.scalars(select(ResumeRequest.kind).order_by(ResumeRequest.id))
            return list(kinds.all())

    assert await requests() == ["resume"]
    retried = await approvals.start(proposal.id, "second", retry_by="UA")
    assert retried.state == ProposalState.EXECUTING
    assert await requests() == ["resume"]  # reopened: nothing more to tell yet
    await approvals.succeed(retried, "second", Outcome({"id": 1}, "done"))
    kinds = await requests()
    assert kinds[0] == "resume"
    assert kinds[1:] == [f"update:{proposal.id}:2"]
    async with db.transaction() as session:
        assert (
            await session.scalar(
                select(func.count())
                .select_from(ResumeRequest)
                .where(ResumeRequest.kind == "resume")
            )
            == 1
        )


EVENTS: list[tuple[str, str]] = []  # (worker, what) in the order it happened
A_STOPPED: list[asyncio.Event] = []  # set when worker A's tool stops (one per test run)


async def quick_preview(args: Args, ctx: ToolContext) -> Preview:
    return Preview(f"Create task '{args.title}'", (Change("title", None, args.title),))


@write_tool("create_task", "a create that takes a while", Args, preview=quick_preview)
async def long_write(args: Args, ctx: ToolContext) -> Outcome:
    """Worker A's write would take 2.2 s, well past A's next renewal (1 s after its claim);
    worker B's, which took the work over, is quick but goes out only once A has stopped (or
    after 2 s): the order to prove is A stopping before any write, not a race of timers."""
    EVENTS.append((ctx.requester, "started"))
    try:
        if ctx.requester == "A":
            await asyncio.sleep(2.2)
        else:  # at most 2 s: inside B's own 2.5 s deadline
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(A_STOPPED[0].wait(), 2.0)
    except asyncio.CancelledError:
        EVENTS.append((ctx.requester, "stopped"))
        if ctx.requester == "A":
            A_STOPPED[0].set()
        raise
    EVENTS.append((ctx.requester, "wrote"))
    return Outcome({"ok": True}, "written")


def worker_executor(approvals: ApprovalsService, worker: str) -> Executor:
    def context(proposal: Proposal) -> ToolContext:
        return ToolContext(
            db=approvals.db,
            slack=None,  # type: ignore[arg-type]
            team_id="T",
            channel_id="C",
            requester=worker,
            idempotency_key=proposal.idempotency_key,
        )

    return Executor(
        approvals, ToolRegistry([long_write]), NoCards(), context, lambda: None, worker, 2.5
    )


async def test_a_worker_whose_lease_was_taken_over_stops_its_tool_before_it_writes(
    db: Database,
) -> None:
    """Worker A's lease lapses while its tool runs (a frozen replica, clocks apart): worker B
    takes the work over and retries it. A's next renewal finds the lease gone and stops its
    tool there, so the write is made once, by B. (A's heartbeat used to log and let its tool
    go on writing next to B's.)"""
    EVENTS.clear()
    A_STOPPED[:] = [asyncio.Event()]
    a = ApprovalsService(db, lease_seconds=3.0)  # renewed every second
    b = ApprovalsService(db, lease_seconds=3.0)
    proposal = await approved(a)
    running_a = asyncio.create_task(worker_executor(a, "A").run(proposal.id))
    await eventually(lambda: ("A", "started") in EVENTS)
    async with db.transaction() as session:
        await session.execute(
            update(Proposal).values(lease_expires_at=utcnow() - timedelta(seconds=1))
        )
    (taken,) = await b.interrupt_lapsed()
    assert taken.state == ProposalState.UNKNOWN
    settled_b = await worker_executor(b, "B").run(proposal.id, retry_by="UB", confirmed=True)
    assert await running_a is None  # A recorded nothing
    assert settled_b is not None
    assert settled_b.state == ProposalState.SUCCEEDED
    assert [e for e in EVENTS if e[1] == "wrote"] == [("B", "wrote")]
    assert ("A", "stopped") in EVENTS
    assert EVENTS.index(("A", "stopped")) < EVENTS.index(("B", "wrote"))
