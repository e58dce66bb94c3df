"""The work no click starts, run at start-up and then every `SWEEP_INTERVAL_SECONDS`: expire
proposals, climb escalation ladders, remind before expiry, recover executions whose lease
lapsed, execute approved proposals nobody started, bring cards (and their copies) that fell
behind in line, and hand the rest (resumes, interrupted replies, retention) to the jobs it was
given. Slack is reached only through the card interface, so this layer stays apart from the
Slack surface."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Protocol

from sqlalchemy import func, select

from bot.approvals.executor import Executor
from bot.approvals.service import ApprovalsService, Escalated
from bot.db.models import Proposal
from bot.metrics import LEASE_TAKEOVERS, PROPOSALS
from bot.states import State
from bot.tasks import TaskGroup

log = logging.getLogger(__name__)


class Cards(Protocol):
    def refresh(self, proposal_id: int) -> None: ...

    async def post(self, proposal: Proposal) -> bool: ...

    async def remind(self, proposal: Proposal) -> None: ...

    async def on_escalation(self, step: Escalated) -> None: ...


Job = Callable[[], Awaitable[None]]


class Sweeper:
    def __init__(
        self,
        approvals: ApprovalsService,
        cards: Cards,
        executor: Executor,
        tasks: TaskGroup,
        interval: float,
        reminder_before: timedelta | None,
        jobs: list[Job] | None = None,
    ) -> None:
        self.approvals = approvals
        self.cards = cards
        self.executor = executor
        self.tasks = tasks
        self.interval = interval
        self.reminder_before = reminder_before
        self.jobs = jobs or []
        # Jobs that run before the sweep moves anything: at start-up, before this process
        # writes its first audit row (the audit checkpoint job, see `CheckpointJob`).
        self.first: list[Job] = []
        self._loop: asyncio.Task[None] | None = None

    async def recover(self) -> None:
        """At start-up: the same as every sweep (there is no special case for "my own
        earlier process": only lapsed leases count as dead)."""
        await self.sweep()

    async def sweep(self) -> None:
        await self._jobs(self.first)
        for proposal in await self.approvals.expire_due():
            self.cards.refresh(proposal.id)
        for step in await self.approvals.escalate_due():
            self.cards.refresh(step.proposal.id)
            await self.cards.on_escalation(step)
        if self.reminder_before:
            for proposal in await self.approvals.due_for_reminder(self.reminder_before):
                await self.cards.remind(proposal)
        for proposal in await self.approvals.interrupt_lapsed():
            LEASE_TAKEOVERS.labels(kind="execution").inc()
            log.warning("proposal %s was interrupted (its lease lapsed)", proposal.id)
            self.cards.refresh(proposal.id)
        for proposal_id in await self.approvals.approved_waiting():
            self.tasks.spawn(self.executor.run(proposal_id), name=f"execute-{proposal_id}")
        for proposal_id in {
            *await self.approvals.cards_behind(),
            *await self.approvals.copies_behind(),
        }:
            self.cards.refresh(proposal_id)
        for proposal in await self.approvals.cards_missing():
            await self.cards.post(proposal)
        await self._count()
        await self._jobs(self.jobs)

    @staticmethod
    async def _jobs(jobs: list[Job]) -> None:
        for job in jobs:
            try:
                await job()
            except Exception:  # one job's failure must not stop the others
                log.exception("sweep job failed")

    async def _count(self) -> None:
        async with self.approvals.db.transaction() as session:
            rows = (
                await session.execute(select(Proposal.state, func.count()).group_by(Proposal.state))
            ).all()
        counts = {State(state): n for state, n in rows}
        for state in State:
            PROPOSALS.labels(state=state.value).set(counts.get(state, 0))

    def start(self) -> None:
        self._loop = asyncio.get_running_loop().create_task(self._run(), name="sweeper")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.sweep()
            except Exception:  # keep sweeping whatever one round ran into
                log.exception("sweep failed")

    async def stop(self) -> None:
        if self._loop is not None:
            self._loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop
