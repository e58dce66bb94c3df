"""The compare-and-set core: the one place that moves a proposal.

Every transition is one `UPDATE … WHERE id AND state AND version [AND guards]` plus its audit
row, in one transaction: whoever loses a race gets `AlreadyHandled` and nothing runs twice. When
a transition settles the last open proposal of a paused turn, the same transaction records a
`ResumeRequest` (an outbox row), so the turn resumes exactly once even when two proposals settle
at the same moment on different workers. Services built on it never commit: `Database.transaction`
is the boundary.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from sqlalchemy import ColumnElement, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from bot.approvals.errors import AlreadyHandled, UnknownProposal, describe_state
from bot.approvals.machine import SETTLED, Event, State, transition
from bot.approvals.model_results import result_for_model
from bot.approvals.ruling import Authorise
from bot.db.audit_chain import append, lock_head
from bot.db.models import (
    Message,
    Proposal,
    ProposalApproval,
    ResumeRequest,
    utcnow,
)
from bot.db.session import Database
from bot.metrics import TRANSITIONS

# A `ResumeRequest` of this kind, born done, marks a turn a person stopped: whatever of it
# settles later (a write that was already executing) is recorded but never resumes the turn.
STOPPED = "stopped"


def vote(proposal: Proposal, approver: str) -> ProposalApproval:
    """One approval of the proposal's current revision and arguments."""
    return ProposalApproval(
        proposal_id=proposal.id,
        approver=approver,
        revision=proposal.revision,
        arguments_hash=proposal.arguments_hash,
    )


class Ledger:
    """Reads proposals and applies transitions (compare-and-set + audit + outbox)."""

    def __init__(self, db: Database, lease_seconds: float = 300.0) -> None:
        self.db = db
        self.lease = timedelta(seconds=lease_seconds)
        # A tool's pack (the policy's rules may name packs), set by the composition root.
        self.pack_of: Callable[[str], str] = lambda _name: ""
        # The one door (`bot.policy.one_door`), set by the composition root; the approvals
        # core's own tests run without it.
        self.door: Authorise | None = None

    async def get(self, proposal_id: int) -> Proposal:
        async with self.db.transaction() as session:
            proposal = await session.get(Proposal, proposal_id)
        if proposal is None:
            raise UnknownProposal("this action no longer exists")
        return proposal

    async def approvers_of(self, proposal_id: int) -> list[str]:
        """Who approved the proposal's current revision (earlier revisions' votes are void)."""
        async with self.db.transaction() as session:
            return await self._approvers_in(session, proposal_id)

    async def with_approvers(self, proposal_id: int) -> tuple[Proposal, list[str]]:
        """The proposal and who approved its current revision, read together (one snapshot,
        what a card shows)."""
        async with self.db.transaction() as session:
            proposal = await session.get(Proposal, proposal_id)
            if proposal is None:
                raise UnknownProposal("this action no longer exists")
            return proposal, await self._approvers_in(session, proposal_id)

    @staticmethod
    async def _approvers_in(session: AsyncSession, proposal_id: int) -> list[str]:
        rows = await session.scalars(
            select(ProposalApproval.approver)
            .join(Proposal, Proposal.id == ProposalApproval.proposal_id)
            .where(
                ProposalApproval.proposal_id == proposal_id,
                ProposalApproval.revision == Proposal.revision,
            )
            .order_by(ProposalApproval.id)
        )
        return list(rows.all())

    async def fire(self, proposal_id: int, event: Event, actor: str, **values: Any) -> Proposal:
        """Apply one event to a proposal in its own transaction (the generic entry point)."""
        async with self.db.transaction() as session:
            proposal = await session.get(Proposal, proposal_id)
            if proposal is None:
                raise UnknownProposal("this action no longer exists")
            return await self._apply(session, proposal, event, actor, **values)

    async def approve_unclicked(
        self,
        session: AsyncSession,
        proposal: Proposal,
        actor: str,
        detail: dict[str, Any],
        event: Event = Event.APPROVE,
        guards: tuple[ColumnElement[bool], ...] = (),
        **values: Any,
    ) -> Proposal:
        """Approved by no click (a policy rule, a grant, the escalation ladder): one vote on
        record in `actor`'s name, so the executor's check of the approvals holds, and the
        arguments frozen as a person's approval freezes them."""
        short = actor[:32]  # the vote's and decider's columns hold a user id's length
        session.add(vote(proposal, short))
        return await self._apply(
            session,
            proposal,
            event,
            actor,
            {**detail, "revision": proposal.revision},
            guards,
            approved_arguments=proposal.arguments,
            approved_hash=proposal.arguments_hash,
            approved_revision=proposal.revision,
            decided_by=short,
            decided_at=utcnow(),
            **values,
        )

    async def apply_in(
        self, session: AsyncSession, proposal: Proposal, event: Event, actor: str
    ) -> Proposal:
        """Apply `event` inside the caller's transaction (e.g. forgetting a conversation)."""
        return await self._apply(session, proposal, event, actor)

    async def _apply(
        self,
        session: AsyncSession,
        proposal: Proposal,
        event: Event,
        actor: str,
        detail: dict[str, Any] | None = None,
        guards: tuple[ColumnElement[bool], ...] = (),
        **values: Any,
    ) -> Proposal:
        """Move `proposal` by `event` if its row is still exactly as read (state and version),
        and `guards` hold (e.g. "this worker holds the lease"); else `AlreadyHandled`."""
        step = transition(State(proposal.state), event)
        await lock_head(session, proposal.team_id)  # the chain's lock first (see audit_chain)
        fresh = await session.scalar(
            update(Proposal)
            .where(
                Proposal.id == proposal.id,
                Proposal.state == step.source,
                Proposal.version == proposal.version,
                *guards,
            )
            .values(state=step.target, version=Proposal.version + 1, updated_at=utcnow(), **values)
            .returning(Proposal)
            .execution_options(populate_existing=True)
        )
        if fresh is None:
            current = await session.get(Proposal, proposal.id, populate_existing=True)
            raise AlreadyHandled(
                f"This action was {describe_state(current) if current else 'removed'}."
            )
        await append(
            session,
            team_id=proposal.team_id,
            proposal_id=proposal.id,
            from_state=step.source.value,
            to_state=step.target.value,
            event=event.value,
            actor=actor,
            detail=detail,
        )
        TRANSITIONS.labels(event=event.value).inc()
        if step.target in SETTLED:
            await self._settle(session, fresh)
        return fresh

    async def _settle(self, session: AsyncSession, proposal: Proposal) -> None:
        """Give the model its result and, if this was the turn's last open proposal, record
        the resume in this same transaction."""
        if proposal.conversation_id is None or proposal.assistant_message_id is None:
            return  # the conversation was forgotten: nobody to resume
        await session.execute(
            update(Message)
            .where(Message.id == proposal.result_message_id)
            .values(content=json.dumps(result_for_model(proposal), ensure_ascii=False))
        )
        # Serialise siblings settling at once (PostgreSQL: row lock; SQLite: one writer).
        await session.execute(
            select(Message.id).where(Message.id == proposal.assistant_message_id).with_for_update()
        )
        open_siblings = await session.scalar(
            select(func.count())
            .select_from(Proposal)
            .where(
                Proposal.assistant_message_id == proposal.assistant_message_id,
                Proposal.state.not_in(list(SETTLED)),
            )
        )
        if open_siblings or await self._stopped(session, proposal):
            return
        already = await session.scalar(
            select(ResumeRequest.id).where(
                ResumeRequest.assistant_message_id == proposal.assistant_message_id,
                ResumeRequest.kind == "resume",
            )
        )
        # A retry that settles after the turn already resumed tells the model in an update.
        kind = "resume" if already is None else f"update:{proposal.id}:{proposal.attempts}"
        try:
            async with session.begin_nested():
                session.add(
                    ResumeRequest(
                        conversation_id=proposal.conversation_id,
                        assistant_message_id=proposal.assistant_message_id,
                        kind=kind,
                    )
                )
        except IntegrityError:
            pass  # recorded by a sibling already

    @staticmethod
    async def _stopped(session: AsyncSession, proposal: Proposal) -> bool:
        if State(proposal.state) is State.WITHDRAWN:
            return True  # only a Stop withdraws, and a stopped turn does not resume
        marker = await session.scalar(
            select(ResumeRequest.id).where(
                ResumeRequest.assistant_message_id == proposal.assistant_message_id,
                ResumeRequest.kind == STOPPED,
            )
        )
        return marker is not None

    @staticmethod
    async def note_in(
        session: AsyncSession, proposal: Proposal, event: str, actor: str, detail: dict[str, Any]
    ) -> None:
        """An audit row for something that happened to a proposal without moving it (a vote,
        an edit, a refused click), in the caller's transaction."""
        state = proposal.state.value
        await append(
            session,
            team_id=proposal.team_id,
            proposal_id=proposal.id,
            from_state=state,
            to_state=state,
            event=event,
            actor=actor,
            detail=detail,
        )

    async def audit_only(
        self, proposal_id: int, event: str, actor: str, detail: dict[str, Any]
    ) -> None:
        async with self.db.transaction() as session:
            proposal = await session.get(Proposal, proposal_id)
            if proposal is not None:
                await self.note_in(session, proposal, event, actor, detail)

    async def refuse(self, proposal_id: int, user: str, action: str, reason: str) -> None:
        """An unauthorised or stale click changes nothing but is remembered."""
        await self.audit_only(proposal_id, "refused", user, {"action": action, "reason": reason})
