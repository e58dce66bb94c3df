"""The arguments an execution may run: exactly the revision its approvers approved, checked
against what the audit trail recorded when that revision was made and against every vote."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bot.approvals.errors import TamperedApproval
from bot.db.models import AuditEntry, Proposal, ProposalApproval
from bot.tools.registry import arguments_hash


async def approved_in(session: AsyncSession, proposal: Proposal) -> dict[str, Any]:
    """Their hash must match the hash recorded when that revision was made (the audit row
    of its proposal or edit), and every vote that approved it must have been cast for it."""
    arguments = proposal.approved_arguments
    revision = proposal.approved_revision
    if arguments is None or revision is None:
        raise TamperedApproval("this action has no approved arguments")
    digest = arguments_hash(arguments)
    made = await session.scalars(
        select(AuditEntry.detail)
        .where(
            AuditEntry.proposal_id == proposal.id,
            AuditEntry.event.in_(["propose", "edit"]),
        )
        .order_by(AuditEntry.id)
    )
    recorded = {
        int((d or {}).get("revision") or 1): (d or {}).get("arguments_hash") for d in made.all()
    }
    votes = (
        await session.execute(
            select(ProposalApproval.revision, ProposalApproval.arguments_hash).where(
                ProposalApproval.proposal_id == proposal.id
            )
        )
    ).all()
    if digest != proposal.approved_hash or recorded.get(revision) != digest:
        raise TamperedApproval("the arguments differ from the approved revision")
    if not votes or any(v.revision != revision or v.arguments_hash != digest for v in votes):
        raise TamperedApproval("the approvals on record are for other arguments")
    return arguments
