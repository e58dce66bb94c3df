"""Forgetting: a person's `/history forget`, and the retention period applied by
`countersign purge` (and hourly while running).

A person's `/history forget` removes what they said and nothing of anyone else's: their own
messages everywhere, and the conversations in which nobody else took part. Shared threads keep
the other people's messages (and the assistant's answers to them).

Removing a conversation never erases the audit trail: every proposal of it stays, with
everything it said (arguments, preview, results, reasons) redacted and only hashes, states,
people and times left, and each of its audit rows stays, its detail redacted. A proposal still
waiting for a decision expires first (an audited transition), so nothing can run afterwards.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import delete, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.approvals.ledger import Ledger
from bot.approvals.machine import Event
from bot.db.models import (
    AuditEntry,
    Conversation,
    Grant,
    Message,
    Participant,
    PolicyDecision,
    ProcessedEvent,
    Proposal,
    ProposalState,
    Role,
    SpendRaise,
    SpendReservation,
    SpendWindow,
    utcnow,
)
from bot.db.session import Database
from bot.files.store import forget_unused_files
from bot.spend.ledger_rows import HELD

log = logging.getLogger(__name__)

REDACTED = "[redacted]"
DEDUP_KEEP = timedelta(days=7)  # Slack retries within minutes; a week is plenty
# A spend window's row is made at its first use; the longest (a calendar month) ends within 31
# days of that, so a row older than this is of a window that ended (what it used, held and was
# raised by no longer limits anything; the raise's proposal and audit rows stay).
SPEND_KEEP = timedelta(days=40)


@dataclass(frozen=True)
class Removed:
    conversations: int
    proposals_redacted: int
    proposals_deleted: int
    delivery_keys: int = 0
    messages: int = 0  # one's own messages removed from threads shared with others


async def _remove(session: AsyncSession, ledger: Ledger, ids: Sequence[int]) -> Removed:
    if not ids:
        return Removed(0, 0, 0)
    waiting = (
        await session.scalars(
            select(Proposal).where(
                Proposal.conversation_id.in_(ids), Proposal.state == ProposalState.PROPOSED
            )
        )
    ).all()
    for proposal in waiting:
        await ledger.apply_in(session, proposal, Event.EXPIRE, "forgotten")
    executed = list(
        (await session.scalars(select(Proposal.id).where(Proposal.conversation_id.in_(ids)))).all()
    )
    if executed:
        await session.execute(
            update(Proposal)
            .where(Proposal.id.in_(executed))
            .values(
                arguments={"redacted": True},
                approved_arguments={"redacted": True},
                description=REDACTED,
                preview=[],
                result=None,
                result_summary=None,
                result_link=None,
                decline_reason=None,
                error=REDACTED,
            )
        )
        await session.execute(
            update(AuditEntry)
            .where(AuditEntry.proposal_id.in_(executed))
            .values(detail={"redacted": True})
        )
    gone = await session.execute(delete(Conversation).where(Conversation.id.in_(ids)))
    await forget_unused_files(session)
    return Removed(getattr(gone, "rowcount", 0), len(executed), 0)


async def forget_user(db: Database, team_id: str, user: str) -> Removed:
    """Remove `user`'s own messages everywhere, and the conversations only they took part in."""
    async with db.transaction() as session:
        theirs = (
            await session.scalars(
                select(Conversation.id)
                .join(Participant, Participant.conversation_id == Conversation.id)
                .where(Conversation.team_id == team_id, Participant.user_id == user)
            )
        ).all()
        others = (
            await session.scalars(
                select(Participant.conversation_id)
                .where(Participant.conversation_id.in_(theirs), Participant.user_id != user)
                .distinct()
            )
        ).all()
        shared = set(others)
        alone = [cid for cid in theirs if cid not in shared]
        words = await session.execute(
            delete(Message).where(
                Message.conversation_id.in_(shared),
                Message.role == Role.USER,
                Message.slack_user == user,
            )
        )
        await session.execute(
            delete(Participant).where(
                Participant.conversation_id.in_(shared), Participant.user_id == user
            )
        )
        # A title is made of a first request's words, which may be theirs: it goes too.
        await session.execute(
            update(Conversation).where(Conversation.id.in_(shared)).values(title=None)
        )
        removed = await _remove(session, Ledger(db), alone)
        await forget_unused_files(session)  # the files they shared in the others
        return Removed(
            removed.conversations,
            removed.proposals_redacted,
            0,
            messages=getattr(words, "rowcount", 0),
        )


async def purge(db: Database, keep: timedelta, batch: int = 500) -> Removed:
    """Delete conversations with no activity for `keep`, and old delivery keys."""
    cutoff = utcnow() - keep
    totals = [0, 0, 0]
    while True:
        async with db.transaction() as session:
            ids = (
                await session.scalars(
                    select(Conversation.id).where(Conversation.updated_at < cutoff).limit(batch)
                )
            ).all()
            removed = await _remove(session, Ledger(db), list(ids))
        totals = [
            totals[0] + removed.conversations,
            totals[1] + removed.proposals_redacted,
            totals[2] + removed.proposals_deleted,
        ]
        if len(ids) < batch:
            break
    async with db.transaction() as session:  # they hold arguments: kept no longer either
        await session.execute(delete(PolicyDecision).where(PolicyDecision.created_at < cutoff))
        # Grants that ended (revoked or expired) before the cutoff cover nothing any more.
        await session.execute(
            delete(Grant).where(or_(Grant.revoked_at < cutoff, Grant.expires_at < cutoff))
        )
    return Removed(totals[0], totals[1], totals[2], await purge_delivery_keys(db))


async def purge_delivery_keys(db: Database) -> int:
    """Forget delivery keys older than a week, whatever `RETENTION_DAYS` says: they only stop
    Slack's retries (minutes apart) from running twice, and would otherwise grow forever."""
    async with db.transaction() as session:
        keys = await session.execute(
            delete(ProcessedEvent).where(ProcessedEvent.created_at < utcnow() - DEDUP_KEEP)
        )
    return int(getattr(keys, "rowcount", 0) or 0)


async def purge_spend(db: Database) -> int:
    """Forget the spend records of windows that ended (`SPEND_KEEP`), whatever
    `RETENTION_DAYS` says: one reservation per model call and one window per turn of a
    per-turn budget would otherwise grow forever. Held reservations stay (`release_stale`
    charges them first)."""
    cutoff = utcnow() - SPEND_KEEP
    async with db.transaction() as session:
        calls = await session.execute(
            delete(SpendReservation).where(
                SpendReservation.state != HELD, SpendReservation.created_at < cutoff
            )
        )
        await session.execute(delete(SpendWindow).where(SpendWindow.created_at < cutoff))
        await session.execute(delete(SpendRaise).where(SpendRaise.created_at < cutoff))
    return int(getattr(calls, "rowcount", 0) or 0)


class Retention:
    """The running bot's clean-up, at start-up and then hourly: conversations idle for more
    than `days` (none when 0: kept forever) and, whatever `days` says, old delivery keys."""

    def __init__(self, db: Database, days: int) -> None:
        self.db = db
        self.days = days
        self._ran_at = -math.inf

    async def __call__(self) -> None:
        if time.monotonic() - self._ran_at < 3600:
            return
        self._ran_at = time.monotonic()
        await purge_spend(self.db)
        if not self.days:
            await purge_delivery_keys(self.db)
            return
        removed = await purge(self.db, timedelta(days=self.days))
        if removed.conversations:
            log.info("retention: removed %d conversation(s)", removed.conversations)
