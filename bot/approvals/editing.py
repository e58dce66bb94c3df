"""Editing a waiting proposal: a new revision of its arguments (`Decisions.edit`).

The edit names the revision its author saw (`_deciding` refuses another); the new revision
voids every earlier vote (they approved other arguments), and the one door's answer on it is
recorded with it.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, update

from bot.approvals.decisions import Decisions
from bot.approvals.errors import AlreadyHandled
from bot.approvals.questions import record_ruling
from bot.approvals.ruling import Question, Ruling, Step
from bot.db.models import Proposal, ProposalApproval, utcnow
from bot.tools.registry import Preview, arguments_hash


class Editing(Decisions):
    async def edit(
        self,
        proposal_id: int,
        user: str,
        arguments: dict[str, Any],
        preview: Preview,
        revision: int | None = None,
        decided: tuple[Question, Ruling] | None = None,
    ) -> Proposal:
        """A new revision of the arguments for a proposal still waiting. The audit keeps both
        revisions, and every earlier vote is void (it approved other arguments). `decided`:
        the one door's answer on the new revision (recorded with it); an ask names its
        deciders from now on (the ladder starts again), an allow or a grant keeps the card's
        (an edit never runs on its own)."""
        async with self._deciding(proposal_id, revision) as (session, proposal):
            before, before_hash = proposal.arguments, proposal.arguments_hash
            # A new revision starts the ladder again: nobody has looked at it yet.
            policy = dict(proposal.policy or {})
            if decided is not None and decided[1].outcome == "ask":
                policy = dict(decided[1].record)
            policy["ladder_from"] = utcnow().isoformat()
            ladder_step = 0
            new_hash = arguments_hash(arguments)
            fresh = await session.scalar(
                update(Proposal)
                .where(Proposal.id == proposal.id, Proposal.version == proposal.version)
                .values(
                    arguments=arguments,
                    arguments_hash=new_hash,
                    description=preview.description,
                    preview=[c.as_json() for c in preview.changes],
                    pin=preview.pin,
                    resolved=preview.resolved,
                    version=Proposal.version + 1,
                    revision=Proposal.revision + 1,
                    revised_by=user,
                    policy=policy,
                    escalation_step=ladder_step,
                    updated_at=utcnow(),
                )
                .returning(Proposal)
                .execution_options(populate_existing=True)
            )
            if fresh is None:
                raise AlreadyHandled("This action changed while you edited it; try again.")
            await session.execute(
                delete(ProposalApproval).where(ProposalApproval.proposal_id == proposal.id)
            )
            if decided is not None:
                record_ruling(session, decided[0], decided[1], Step.EDIT, user, proposal.id)
            await self.note_in(
                session,
                proposal,
                "edit",
                user,
                {
                    "before": before,
                    "before_hash": before_hash,
                    "before_revision": fresh.revision - 1,
                    "after": arguments,
                    "after_hash": new_hash,
                    "revision": fresh.revision,
                    "arguments_hash": new_hash,
                    "resolved": preview.resolved,
                },
            )
            return fresh
