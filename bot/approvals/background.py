"""The work no click starts: resuming settled turns (the outbox), expiring proposals, reminders
before expiry, and recovering executions cut off by a crash."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from datetime import timedelta

from sqlalchemy import select, update

from bot.approvals.executor import Executor
from bot.approvals.service import ApprovalsService
from bot.conversation.turn import Conversations
from bot.db.models import Proposal, ResumeRequest, utcnow
from bot.db.session import Database
from bot.records.retention import purge
from bot.slack.card_publisher import CardPublisher
from bot.slack.cards import slack_date
from bot.slack.render import escape
from bot.tasks import TaskGroup

log = logging.getLogger(__name__)


def host_prefix() -> str:
    return f"{socket.gethostname()}/"


def new_worker_id() -> str:
    """Unique per process; the host part lets a restarted process spot its predecessor's
    abandoned executions."""
    return f"{host_prefix()}{os.getpid()}/{uuid.uuid4().hex[:8]}"


class ResumeWorker:
    """Consumes `ResumeRequest` rows: each is claimed with a compare-and-set, so exactly one
    worker (on any replica) resumes a turn."""

    def __init__(
        self, db: Database, conversations: Conversations, tasks: TaskGroup, worker: str
    ) -> None:
        self.db = db
        self.conversations = conversations
        self.tasks = tasks
        self.worker = worker
        self._draining: asyncio.Task[None] | None = None
        self._again = False

    def kick(self) -> None:
        if self._draining is not None and not self._draining.done():
            self._again = True
            return
        self._draining = self.tasks.spawn(self._drain(), name="resume-drain")

    async def _drain(self) -> None:
        while True:
            self._again = False
            async with self.db.transaction() as session:
                waiting = (
                    await session.scalars(
                        select(ResumeRequest)
                        .where(ResumeRequest.claimed_at.is_(None))
                        .order_by(ResumeRequest.id)
                        .limit(100)
                    )
                ).all()
            for request in waiting:
                if await self._claim(request.id):
                    self.tasks.spawn(self._resume(request), name=f"resume-{request.id}")
            if not self._again:
                return

    async def _claim(self, request_id: int) -> bool:
        async with self.db.transaction() as session:
            result = await session.execute(
                update(ResumeRequest)
                .where(ResumeRequest.id == request_id, ResumeRequest.claimed_at.is_(None))
                .values(claimed_by=self.worker, claimed_at=utcnow())
            )
            return getattr(result, "rowcount", 0) == 1

    async def _resume(self, request: ResumeRequest) -> None:
        note = None
        if request.kind.startswith("update:"):
            proposal_id = int(request.kind.split(":")[1])
            async with self.db.transaction() as session:
                proposal = await session.get(Proposal, proposal_id)
            if proposal is not None:
                note = (
                    f"Update: the earlier action '{proposal.description}' (tool call "
                    f"{proposal.tool_call_id}) was retried and is now {proposal.state.value}"
                    + (f": {proposal.error}" if proposal.error else ".")
                    + " Tell the user briefly."
                )
        await self.conversations.resume(request.conversation_id, note)
        async with self.db.transaction() as session:
            await session.execute(
                update(ResumeRequest).where(ResumeRequest.id == request.id).values(done_at=utcnow())
            )


class Sweeper:
    """Periodic: expire, remind, recover; also the fallback that picks up resumes and approved
    proposals another replica left behind."""

    def __init__(
        self,
        approvals: ApprovalsService,
        cards: CardPublisher,
        executor: Executor,
        resumer: ResumeWorker,
        tasks: TaskGroup,
        interval: float,
        reminder_before: timedelta | None,
        db: Database | None = None,
        retention: timedelta | None = None,
    ) -> None:
        self.approvals = approvals
        self.cards = cards
        self.executor = executor
        self.resumer = resumer
        self.tasks = tasks
        self.interval = interval
        self.reminder_before = reminder_before
        self.db = db
        self.retention = retention
        self._purged_at = 0.0
        self._loop: asyncio.Task[None] | None = None

    async def recover(self) -> None:
        """At start-up: executions cut off by a crash become failed (with Retry); approved
        proposals nobody started are executed; settled turns not yet resumed are resumed."""
        for proposal in await self.approvals.interrupt_abandoned(
            self.executor.worker, host_prefix()
        ):
            log.warning("proposal %s was interrupted by a restart", proposal.id)
            await self.cards.refresh(proposal.id)
        for proposal_id in await self.approvals.approved_waiting():
            self.tasks.spawn(self.executor.run(proposal_id), name=f"execute-{proposal_id}")
        self.resumer.kick()

    async def sweep(self) -> None:
        for proposal in await self.approvals.expire_due():
            await self.cards.refresh(proposal.id)
        if self.reminder_before:
            for proposal in await self.approvals.due_for_reminder(self.reminder_before):
                await self._remind(proposal)
        for proposal in await self.approvals.interrupt_abandoned(self.executor.worker, "\x00never"):
            await self.cards.refresh(proposal.id)
        for proposal_id in await self.approvals.approved_waiting():
            self.tasks.spawn(self.executor.run(proposal_id), name=f"execute-{proposal_id}")
        self.resumer.kick()
        if self.db is not None and self.retention and time.monotonic() - self._purged_at > 3600:
            self._purged_at = time.monotonic()
            removed = await purge(self.db, self.retention)
            if removed.conversations:
                log.info("retention: removed %d conversation(s)", removed.conversations)

    async def _remind(self, proposal: Proposal) -> None:
        text = (
            f":alarm_clock: <@{proposal.requester}>, an action waits for a decision and "
            f"expires {slack_date(proposal.expires_at)}: {escape(proposal.description[:200])}"
        )
        try:
            await self.cards.slack.chat_postMessage(
                channel=proposal.channel_id, thread_ts=proposal.thread_ts, text=text
            )
        except Exception as exc:  # a missed reminder must not stop the sweep
            log.warning("reminder for proposal %s failed: %s", proposal.id, exc)

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
