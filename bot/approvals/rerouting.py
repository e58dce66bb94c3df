"""When the one door names other deciders for a waiting proposal than its card does (the policy
was reloaded, or an Edit made a revision another rule asks about), the proposal follows the
door: its recorded ruling is replaced, every vote is void (it was cast under other
requirements), the ladder starts again, and an audit row says what changed. A deny for a
waiting proposal closes it (`Event.POLICY_DENY`), telling the model why. Every answer the
door gives at a click is recorded (`record`)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select, update

from bot.approvals.errors import AlreadyHandled
from bot.approvals.ledger import Ledger
from bot.approvals.machine import Event, State
from bot.approvals.questions import record_ruling
from bot.approvals.ruling import Question, Ruling, Step
from bot.db.audit_chain import lock_head
from bot.db.models import Proposal, ProposalApproval, utcnow


def _requirements(kept: dict[str, Any] | None) -> dict[str, Any]:
    kept = kept or {}
    keys = ("rule", "approvers", "approvals_required", "four_eyes", "route", "version")
    return {k: kept.get(k) for k in keys}


class Rerouting(Ledger):
    async def record(
        self, question: Question, ruling: Ruling, step: Step, actor: str | None
    ) -> None:
        """The door's answer at a click, kept with the decisions (what `policy replay` and an
        auditor read), in a transaction of its own."""
        async with self.db.transaction() as session:
            record_ruling(session, question, ruling, step, actor)

    async def reroute(self, proposal_id: int, seen_version: int, ruling: Ruling) -> Proposal | None:
        """Give the waiting proposal the door's new deciders; None if it is no longer waiting
        or has moved since `seen_version` (whoever moved it decided with the door too)."""
        async with self.db.transaction() as session:
            team = await session.scalar(select(Proposal.team_id).where(Proposal.id == proposal_id))
            if team is None:
                return None
            await lock_head(session, team)
            before = await session.scalar(select(Proposal.policy).where(Proposal.id == proposal_id))
            fresh = await session.scalar(
                update(Proposal)
                .where(
                    Proposal.id == proposal_id,
                    Proposal.state == State.PROPOSED,
                    Proposal.version == seen_version,
                )
                .values(
                    policy={**ruling.record, "ladder_from": utcnow().isoformat()},
                    escalation_step=0,
                    version=Proposal.version + 1,
                    updated_at=utcnow(),
                )
                .returning(Proposal)
                .execution_options(populate_existing=True)
            )
            if fresh is None:
                return None
            await session.execute(
                delete(ProposalApproval).where(ProposalApproval.proposal_id == proposal_id)
            )
            await self.note_in(
                session,
                fresh,
                "reroute",
                "policy",
                {"revision": fresh.revision, "now": _requirements(ruling.record),
                 "policy_version": ruling.version,
                 "before": _requirements(before)},
            )  # fmt: skip
            return fresh

    async def close_by_policy(
        self, proposal_id: int, seen_version: int, ruling: Ruling
    ) -> Proposal:
        """The policy in force denies the waiting revision: closed, with the rule's reason
        (for the model and the card); `AlreadyHandled` if it moved on."""
        async with self.db.transaction() as session:
            proposal = await session.get(Proposal, proposal_id)
            if proposal is None or proposal.version != seen_version:
                raise AlreadyHandled("This action changed a moment ago.")
            reason = f"forbidden by the approval policy in force: {ruling.reason or ruling.rule}"
            return await self._apply(
                session,
                proposal,
                Event.POLICY_DENY,
                "policy",
                {"rule": ruling.rule, "policy_version": ruling.version, "reason": reason,
                 "revision": proposal.revision},
                decided_by="policy",
                decided_at=utcnow(),
                decline_reason=reason,
            )  # fmt: skip
