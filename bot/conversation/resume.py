"""Resuming paused turns from the outbox (`ResumeRequest`), exactly once, whatever crashes.

A worker claims a request with a lease (compare-and-set: free, or its lease lapsed), renews the
lease while the resumed reply is written, and marks the request done in the same transaction
that stores the resumed reply. An exception, a crash or a shutdown before that leaves the
request to be claimed again once the lease lapses (a model failure: after a back-off, at most
`MAX_ATTEMPTS` times). A worker that lost its lease cannot mark the request done.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.conversation.turn import Conversations
from bot.db.models import BudgetPause, Proposal, ResumeRequest, utcnow
from bot.db.session import Database
from bot.metrics import LEASE_LOST, LEASE_TAKEOVERS, RESUMES
from bot.spend.pauses import pause_of
from bot.tasks import TaskGroup

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 3  # model failures before a resume is given up
MAX_CLAIMS = 6  # claims (crashes, errors, takeovers included) before it is given up


class ResumeWorker:
    def __init__(
        self,
        db: Database,
        conversations: Conversations,
        tasks: TaskGroup,
        worker: str,
        lease_seconds: float = 120.0,
    ) -> None:
        self.db = db
        self.conversations = conversations
        self.tasks = tasks
        self.worker = worker
        self.lease = timedelta(seconds=lease_seconds)
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
            now = utcnow()
            async with self.db.transaction() as session:
                waiting = (
                    await session.scalars(
                        select(ResumeRequest)
                        .where(
                            ResumeRequest.done_at.is_(None),
                            ResumeRequest.attempts < MAX_CLAIMS,
                            self._free(now),
                        )
                        .order_by(ResumeRequest.id)
                        .limit(100)
                    )
                ).all()
            for request in waiting:
                if await self._claim(request, now):
                    self.tasks.spawn(self._resume(request), name=f"resume-{request.id}")
            if not self._again:
                return

    @staticmethod
    def _free(now: datetime) -> ColumnElement[bool]:
        return or_(ResumeRequest.lease_expires_at.is_(None), ResumeRequest.lease_expires_at <= now)

    async def _claim(self, request: ResumeRequest, now: datetime) -> bool:
        async with self.db.transaction() as session:
            result = await session.execute(
                update(ResumeRequest)
                .where(
                    ResumeRequest.id == request.id,
                    ResumeRequest.done_at.is_(None),
                    self._free(now),
                )
                .values(
                    claimed_by=self.worker,
                    claimed_at=utcnow(),
                    lease_expires_at=utcnow() + self.lease,
                    attempts=ResumeRequest.attempts + 1,
                )
            )
        claimed = getattr(result, "rowcount", 0) == 1
        if claimed and request.claimed_by is not None and request.attempts > 0:
            LEASE_TAKEOVERS.labels(kind="resume").inc()
        return claimed

    async def _mark_done(self, session: AsyncSession, request_id: int) -> None:
        result = await session.execute(
            update(ResumeRequest)
            .where(
                ResumeRequest.id == request_id,
                ResumeRequest.claimed_by == self.worker,
                ResumeRequest.done_at.is_(None),
            )
            .values(done_at=utcnow(), lease_expires_at=None)
        )
        if getattr(result, "rowcount", 0) != 1:
            LEASE_LOST.labels(kind="resume").inc()
            raise RuntimeError(f"resume {request_id}: lease lost before the reply was stored")

    async def _heartbeat(self, request_id: int) -> None:
        while True:
            await asyncio.sleep(self.lease.total_seconds() / 3)
            with contextlib.suppress(Exception):
                async with self.db.transaction() as session:
                    await session.execute(
                        update(ResumeRequest)
                        .where(
                            ResumeRequest.id == request_id,
                            ResumeRequest.claimed_by == self.worker,
                            ResumeRequest.done_at.is_(None),
                        )
                        .values(lease_expires_at=utcnow() + self.lease)
                    )

    async def _note(self, request: ResumeRequest) -> str | None:
        if not request.kind.startswith("update:"):
            return None
        proposal_id = int(request.kind.split(":")[1])
        async with self.db.transaction() as session:
            proposal = await session.get(Proposal, proposal_id)
        if proposal is None:
            return None
        return (
            f"Update: the earlier action '{proposal.description}' (tool call "
            f"{proposal.tool_call_id}) was retried and is now {proposal.state.value}"
            + (f": {proposal.error}" if proposal.error else ".")
            + " Tell the user briefly."
        )

    async def _paused(self, request: ResumeRequest) -> BudgetPause | None:
        """The budget pause a request continues (kind `budget:<id>`), if it is one."""
        pause_id = pause_of(request.kind)
        if pause_id is None:
            return None
        async with self.db.reading() as session:
            return await session.get(BudgetPause, pause_id)

    async def _resume(self, request: ResumeRequest) -> None:
        heartbeat = asyncio.get_running_loop().create_task(self._heartbeat(request.id))
        try:
            done = await self.conversations.resume(
                request.conversation_id,
                request.assistant_message_id,
                await self._note(request),
                lambda session: self._mark_done(session, request.id),
                await self._paused(request),
            )
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat
        if done:
            async with self.db.transaction() as session:  # no-op if the reply marked it
                await session.execute(
                    update(ResumeRequest)
                    .where(ResumeRequest.id == request.id, ResumeRequest.done_at.is_(None))
                    .where(ResumeRequest.claimed_by == self.worker)
                    .values(done_at=utcnow(), lease_expires_at=None)
                )
            RESUMES.labels(outcome="done").inc()
            return
        # The model failed before anything was stored: try again later, a few times.
        attempts = request.attempts + 1
        async with self.db.transaction() as session:
            await session.execute(
                update(ResumeRequest)
                .where(ResumeRequest.id == request.id, ResumeRequest.claimed_by == self.worker)
                .values(
                    lease_expires_at=utcnow() + timedelta(seconds=30 * attempts),
                    done_at=utcnow() if attempts >= MAX_ATTEMPTS else None,
                )
            )
        RESUMES.labels(outcome="failed").inc()
