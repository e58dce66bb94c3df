"""Forgetting: a person's `/history forget`, and the retention period applied by
`countersign purge` (and hourly while running).

Conversations go with their messages, summaries and participants. Actions that were carried
out keep their proposal and audit rows, with everything they said (arguments, preview, results,
reasons) redacted and only hashes, states, people and times left; other proposals go entirely.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.db.models import (
    AuditEntry,
    Conversation,
    ProcessedEvent,
    Proposal,
    ProposalState,
    utcnow,
)
from bot.db.session import Database

REDACTED = "[redacted]"
EXECUTED = (ProposalState.SUCCEEDED, ProposalState.FAILED, ProposalState.EXECUTING)
DEDUP_KEEP = timedelta(days=7)  # Slack retries within minutes; a week is plenty


@dataclass(frozen=True)
class Removed:
    conversations: int
    proposals_redacted: int
    proposals_deleted: int
    delivery_keys: int = 0


async def _remove(session: AsyncSession, ids: Sequence[int]) -> Removed:
    if not ids:
        return Removed(0, 0, 0)
    executed = list(
        (
            await session.scalars(
                select(Proposal.id).where(
                    Proposal.conversation_id.in_(ids), Proposal.state.in_(EXECUTED)
                )
            )
        ).all()
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
    dropped = await session.execute(
        delete(Proposal).where(Proposal.conversation_id.in_(ids), Proposal.state.not_in(EXECUTED))
    )
    gone = await session.execute(delete(Conversation).where(Conversation.id.in_(ids)))
    return Removed(getattr(gone, "rowcount", 0), len(executed), getattr(dropped, "rowcount", 0))


async def forget_user(db: Database, team_id: str, user: str) -> Removed:
    """Delete the conversations `user` started (others' conversations they took part in stay:
    they belong to those people too)."""
    async with db.transaction() as session:
        ids = (
            await session.scalars(
                select(Conversation.id).where(
                    Conversation.team_id == team_id, Conversation.started_by == user
                )
            )
        ).all()
        return await _remove(session, list(ids))


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
            removed = await _remove(session, list(ids))
        totals = [
            totals[0] + removed.conversations,
            totals[1] + removed.proposals_redacted,
            totals[2] + removed.proposals_deleted,
        ]
        if len(ids) < batch:
            break
    async with db.transaction() as session:
        keys = await session.execute(
            delete(ProcessedEvent).where(ProcessedEvent.created_at < utcnow() - DEDUP_KEEP)
        )
    return Removed(totals[0], totals[1], totals[2], getattr(keys, "rowcount", 0))
