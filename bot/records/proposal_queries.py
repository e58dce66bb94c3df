"""Read queries behind /approvals and the App Home's lists of actions: what waits for a
person, what they asked for or decided lately, and what they may know of the conversations
those actions came from."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from bot.db.models import (
    CardCopy,
    Conversation,
    Participant,
    Proposal,
    ProposalApproval,
    ProposalState,
    utcnow,
)


async def titles_of(session: AsyncSession, conversation_ids: list[int]) -> dict[int, str]:
    """The titles of these conversations (those that have one)."""
    if not conversation_ids:
        return {}
    rows = await session.execute(
        select(Conversation.id, Conversation.title).where(
            Conversation.id.in_(conversation_ids), Conversation.title.is_not(None)
        )
    )
    return {cid: title for cid, title in rows.all() if title}


async def taking_part(session: AsyncSession, user: str, conversation_ids: list[int]) -> set[int]:
    """Which of these conversations `user` took part in."""
    if not conversation_ids:
        return set()
    rows = await session.scalars(
        select(Participant.conversation_id).where(
            Participant.user_id == user, Participant.conversation_id.in_(conversation_ids)
        )
    )
    return set(rows.all())


async def waiting_proposals(
    session: AsyncSession, team_id: str, requester: str | None = None, limit: int = 200
) -> list[Proposal]:
    """Proposals of the workspace still waiting (the caller filters by who may decide); only
    `requester`'s own when nobody else approves anything."""
    query = select(Proposal).where(
        Proposal.state == ProposalState.PROPOSED,
        Proposal.team_id == team_id,
        Proposal.expires_at > utcnow(),
    )
    if requester is not None:
        query = query.where(Proposal.requester == requester)
    rows = await session.scalars(query.order_by(Proposal.expires_at).limit(limit))
    return list(rows.all())


async def voted_by(session: AsyncSession, user: str) -> set[int]:
    rows = await session.scalars(
        select(ProposalApproval.proposal_id).where(ProposalApproval.approver == user)
    )
    return set(rows.all())


async def my_recent_proposals(
    session: AsyncSession, team_id: str, user: str, days: int = 14, limit: int = 10
) -> list[Proposal]:
    """Proposals the user asked for, decided or voted on lately."""
    voted = select(ProposalApproval.proposal_id).where(ProposalApproval.approver == user)
    return list(
        (
            await session.scalars(
                select(Proposal)
                .where(
                    Proposal.team_id == team_id,
                    Proposal.updated_at > utcnow() - timedelta(days=days),
                    or_(
                        Proposal.requester == user,
                        Proposal.decided_by == user,
                        Proposal.id.in_(voted),
                    ),
                )
                .order_by(Proposal.updated_at.desc())
                .limit(limit)
            )
        ).all()
    )


async def card_copies_of(session: AsyncSession, proposal_ids: list[int]) -> list[CardCopy]:
    """The copies of these proposals' cards sent to people (their DMs)."""
    if not proposal_ids:
        return []
    found = await session.scalars(select(CardCopy).where(CardCopy.proposal_id.in_(proposal_ids)))
    return list(found)
