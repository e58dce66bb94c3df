"""What time does to proposals: expiry, reminders before expiry, and recovery of executions
whose lease lapsed (their worker died or froze). Liveness comes only from lapsed leases."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import select, update

from bot.approvals.errors import AlreadyHandled
from bot.approvals.ledger import Ledger
from bot.approvals.machine import Event, State
from bot.db.models import Proposal, utcnow

INTERRUPTED = (
    "interrupted: the bot stopped while this action was running, so the write may have run. "
    "Its outcome is unknown: check the destination before retrying (Retry looks for the "
    "earlier write first where the tool can; otherwise it asks you to confirm, since it may "
    "write twice)."
)


class Clock(Ledger):
    async def expire_due(self, now: datetime | None = None) -> list[Proposal]:
        now = now or utcnow()
        async with self.db.transaction() as session:
            due = (
                await session.scalars(
                    select(Proposal.id).where(
                        Proposal.state == State.PROPOSED, Proposal.expires_at <= now
                    )
                )
            ).all()
        expired = []
        for proposal_id in due:
            try:
                async with self.db.transaction() as session:
                    proposal = await session.get(Proposal, proposal_id)
                    if proposal is not None:
                        expired.append(
                            await self._apply(
                                session,
                                proposal,
                                Event.EXPIRE,
                                "clock",
                                guards=(Proposal.expires_at <= now,),
                            )
                        )
            except AlreadyHandled:
                continue  # decided a moment before the clock got to it
        return expired

    async def due_for_reminder(self, before_expiry: timedelta) -> list[Proposal]:
        """Proposals expiring soon that have had no reminder yet (marked as reminded here)."""
        now = utcnow()
        async with self.db.transaction() as session:
            rows = (
                await session.scalars(
                    select(Proposal).where(
                        Proposal.state == State.PROPOSED,
                        Proposal.reminded_at.is_(None),
                        Proposal.expires_at <= now + before_expiry,
                        Proposal.expires_at > now,
                    )
                )
            ).all()
            reminded = []
            for proposal in rows:
                result = await session.execute(
                    update(Proposal)
                    .where(Proposal.id == proposal.id, Proposal.reminded_at.is_(None))
                    .values(reminded_at=now)
                )
                if getattr(result, "rowcount", 0) == 1:
                    reminded.append(proposal)
            return reminded

    async def interrupt_lapsed(self, now: datetime | None = None) -> list[Proposal]:
        """Executions whose lease lapsed were cut off (crash, freeze): the write may have run,
        so they become unknown ("interrupted") and can be retried. A live lease is never
        touched, whoever holds it."""
        now = now or utcnow()
        async with self.db.transaction() as session:
            rows = (
                await session.scalars(
                    select(Proposal).where(
                        Proposal.state == State.EXECUTING, Proposal.lease_expires_at <= now
                    )
                )
            ).all()
        interrupted = []
        for proposal in rows:
            try:
                async with self.db.transaction() as session:
                    interrupted.append(
                        await self._apply(
                            session,
                            proposal,
                            Event.INTERRUPT,
                            "recovery",
                            {"previous_worker": proposal.lease_owner},
                            (Proposal.lease_expires_at <= now,),
                            error=INTERRUPTED,
                            lease_owner=None,
                            lease_expires_at=None,
                        )
                    )
            except AlreadyHandled:
                continue  # renewed or finished a moment ago
        return interrupted

    async def approved_waiting(self) -> list[int]:
        async with self.db.transaction() as session:
            rows = await session.scalars(
                select(Proposal.id).where(Proposal.state == State.APPROVED)
            )
            return list(rows.all())
