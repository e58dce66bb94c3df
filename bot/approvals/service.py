"""Moving proposals through the state machine.

Every transition is one compare-and-set `UPDATE … WHERE id AND state AND version` plus its audit
row, in one transaction: whoever loses a race gets `AlreadyHandled` and nothing runs twice. When
a transition settles the last open proposal of a paused turn, the same transaction records a
`ResumeRequest` (an outbox row), so the turn resumes exactly once even when two proposals settle
at the same moment on different workers.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from bot.approvals.machine import SETTLED, Event, State, transition
from bot.db.models import (
    AuditEntry,
    Message,
    Proposal,
    ProposalApproval,
    ProposalState,
    ResumeRequest,
    utcnow,
)
from bot.db.session import Database
from bot.tools.registry import Outcome, Preview, arguments_hash


class ApprovalError(Exception):
    """A click that changes nothing; `user_message` is shown to the clicker."""

    def __init__(self, user_message: str) -> None:
        super().__init__(user_message)
        self.user_message = user_message


class AlreadyHandled(ApprovalError):
    pass


class NotAuthorised(ApprovalError):
    pass


class UnknownProposal(ApprovalError):
    pass


def result_for_model(proposal: Proposal) -> dict[str, Any]:
    """What the model reads in the `tool` message once the proposal is settled."""
    state = State(proposal.state)
    if state is State.SUCCEEDED:
        return {"status": "succeeded", "result": proposal.result or {}}
    if state is State.DECLINED:
        return {
            "status": "declined",
            "reason": proposal.decline_reason or "no reason given",
            "instruction": "A person declined this action; it was not carried out. Do not "
            "repeat the same call; continue without it or ask what to do instead.",
        }
    if state is State.EXPIRED:
        return {
            "status": "expired",
            "instruction": "Nobody approved this action in time; it was not carried out.",
        }
    return {"status": "failed", "error": proposal.error or "unknown error"}


def _describe_state(proposal: Proposal) -> str:
    who = f" by <@{proposal.decided_by}>" if proposal.decided_by else ""
    return f"already {proposal.state}{who}"


@dataclass(frozen=True)
class VoteResult:
    proposal: Proposal
    approvers: list[str]
    approved_now: bool


class ApprovalsService:
    def __init__(self, db: Database, lease_seconds: float = 300.0) -> None:
        self.db = db
        self.lease = timedelta(seconds=lease_seconds)

    # -- creating ----------------------------------------------------------------------------
    async def propose(
        self,
        session: AsyncSession,
        *,
        team_id: str,
        conversation_id: int,
        assistant_message_id: int,
        result_message_id: int,
        tool_call_id: str,
        tool_name: str,
        arguments: dict[str, Any],
        preview: Preview,
        requester: str,
        channel_id: str,
        thread_ts: str | None,
        expires_in: timedelta,
    ) -> Proposal:
        proposal = Proposal(
            team_id=team_id,
            conversation_id=conversation_id,
            assistant_message_id=assistant_message_id,
            result_message_id=result_message_id,
            tool_call_id=tool_call_id,
            tool_name=tool_name,
            arguments=arguments,
            arguments_hash=arguments_hash(arguments),
            description=preview.description,
            preview=[c.as_json() for c in preview.changes],
            requester=requester,
            idempotency_key=secrets.token_hex(16),
            state=ProposalState.PROPOSED,
            version=1,
            expires_at=utcnow() + expires_in,
            channel_id=channel_id,
            thread_ts=thread_ts,
        )
        session.add(proposal)
        await session.flush()
        session.add(
            AuditEntry(
                proposal_id=proposal.id,
                from_state=None,
                to_state=State.PROPOSED.value,
                event="propose",
                actor=requester,
                detail={"arguments": arguments, "arguments_hash": proposal.arguments_hash},
            )
        )
        return proposal

    async def set_card(self, proposal_id: int, channel: str, ts: str) -> None:
        async with self.db.transaction() as session:
            await session.execute(
                update(Proposal)
                .where(Proposal.id == proposal_id)
                .values(card_channel=channel, card_ts=ts)
            )

    # -- reading -----------------------------------------------------------------------------
    async def get(self, proposal_id: int) -> Proposal:
        async with self.db.transaction() as session:
            proposal = await session.get(Proposal, proposal_id)
        if proposal is None:
            raise UnknownProposal("this action no longer exists")
        return proposal

    async def approvers_of(self, proposal_id: int) -> list[str]:
        async with self.db.transaction() as session:
            rows = await session.scalars(
                select(ProposalApproval.approver)
                .where(ProposalApproval.proposal_id == proposal_id)
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

    # -- the one place that moves a proposal ------------------------------------------------
    async def _apply(
        self,
        session: AsyncSession,
        proposal: Proposal,
        event: Event,
        actor: str,
        detail: dict[str, Any] | None = None,
        **values: Any,
    ) -> Proposal:
        step = transition(State(proposal.state), event)
        # Compare-and-set; RETURNING hands back the new row without a second query.
        fresh = await session.scalar(
            update(Proposal)
            .where(
                Proposal.id == proposal.id,
                Proposal.state == step.source,
                Proposal.version == proposal.version,
            )
            .values(
                state=step.target,
                version=Proposal.version + 1,
                updated_at=utcnow(),
                **values,
            )
            .returning(Proposal)
            .execution_options(populate_existing=True)
        )
        if fresh is None:
            current = await session.get(Proposal, proposal.id, populate_existing=True)
            raise AlreadyHandled(
                f"This action was {_describe_state(current) if current else 'removed'}."
            )
        session.add(
            AuditEntry(
                proposal_id=proposal.id,
                from_state=step.source.value,
                to_state=step.target.value,
                event=event.value,
                actor=actor,
                detail=detail,
            )
        )
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
        if open_siblings:
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

    async def _audit_only(
        self, proposal_id: int, event: str, actor: str, detail: dict[str, Any]
    ) -> None:
        async with self.db.transaction() as session:
            proposal = await session.get(Proposal, proposal_id)
            session.add(
                AuditEntry(
                    proposal_id=proposal_id,
                    from_state=proposal.state.value if proposal else None,
                    to_state=proposal.state.value if proposal else None,
                    event=event,
                    actor=actor,
                    detail=detail,
                )
            )

    async def refuse(self, proposal_id: int, user: str, action: str, reason: str) -> None:
        """An unauthorised click changes nothing but is remembered."""
        await self._audit_only(proposal_id, "refused", user, {"action": action, "reason": reason})

    # -- people ------------------------------------------------------------------------------
    @asynccontextmanager
    async def _deciding(self, proposal_id: int) -> AsyncIterator[tuple[AsyncSession, Proposal]]:
        """The locked proposal inside one transaction, for a person's decision. If its time is
        up, it expires instead (committed, so the refusal does not roll the expiry back)."""
        async with self.db.transaction() as session:
            proposal = await session.get(Proposal, proposal_id, with_for_update=True)
            if proposal is None:
                raise UnknownProposal("this action no longer exists")
            if State(proposal.state) is not State.PROPOSED or proposal.expires_at > utcnow():
                yield session, proposal
                return
            await self._apply(session, proposal, Event.EXPIRE, "clock")
        raise AlreadyHandled("This action expired before anyone decided; nothing was done.")

    async def vote(self, proposal_id: int, user: str, approvals_required: int) -> VoteResult:
        """Record `user`'s approval; the quorum's last vote moves the proposal to approved and
        freezes the exact arguments (and their hash) that the executor will run."""
        async with self._deciding(proposal_id) as (session, proposal):
            if State(proposal.state) is not State.PROPOSED:
                raise AlreadyHandled(f"This action was {_describe_state(proposal)}.")
            try:
                async with session.begin_nested():
                    session.add(ProposalApproval(proposal_id=proposal.id, approver=user))
            except IntegrityError:
                raise AlreadyHandled("You have already approved this action.") from None
            approvers = list(
                (
                    await session.scalars(
                        select(ProposalApproval.approver)
                        .where(ProposalApproval.proposal_id == proposal.id)
                        .order_by(ProposalApproval.id)
                    )
                ).all()
            )
            if len(approvers) < approvals_required:
                session.add(
                    AuditEntry(
                        proposal_id=proposal.id,
                        from_state=proposal.state.value,
                        to_state=proposal.state.value,
                        event="vote",
                        actor=user,
                        detail={"votes": len(approvers), "required": approvals_required},
                    )
                )
                return VoteResult(proposal, approvers, approved_now=False)
            approved = await self._apply(
                session,
                proposal,
                Event.APPROVE,
                user,
                {"approvers": approvers, "arguments_hash": proposal.arguments_hash},
                approved_arguments=proposal.arguments,
                approved_hash=proposal.arguments_hash,
                decided_by=user,
                decided_at=utcnow(),
            )
            return VoteResult(approved, approvers, approved_now=True)

    async def decline(self, proposal_id: int, user: str, reason: str | None) -> Proposal:
        async with self._deciding(proposal_id) as (session, proposal):
            return await self._apply(
                session,
                proposal,
                Event.DECLINE,
                user,
                {"reason": reason},
                decided_by=user,
                decided_at=utcnow(),
                decline_reason=reason,
            )

    async def edit(
        self, proposal_id: int, user: str, arguments: dict[str, Any], preview: Preview
    ) -> Proposal:
        """New arguments for a proposal still waiting; the audit keeps both versions and
        earlier approvals no longer count (they approved other arguments)."""
        async with self._deciding(proposal_id) as (session, proposal):
            if State(proposal.state) is not State.PROPOSED:
                raise AlreadyHandled(f"This action was {_describe_state(proposal)}.")
            before, before_hash = proposal.arguments, proposal.arguments_hash
            new_hash = arguments_hash(arguments)
            result = await session.execute(
                update(Proposal)
                .where(Proposal.id == proposal.id, Proposal.version == proposal.version)
                .values(
                    arguments=arguments,
                    arguments_hash=new_hash,
                    description=preview.description,
                    preview=[c.as_json() for c in preview.changes],
                    version=Proposal.version + 1,
                    updated_at=utcnow(),
                )
                .execution_options(synchronize_session=False)
            )
            if getattr(result, "rowcount", 0) != 1:
                raise AlreadyHandled("This action changed while you edited it; try again.")
            votes = await session.scalars(
                select(ProposalApproval).where(ProposalApproval.proposal_id == proposal.id)
            )
            for vote in votes.all():
                await session.delete(vote)
            session.add(
                AuditEntry(
                    proposal_id=proposal.id,
                    from_state=proposal.state.value,
                    to_state=proposal.state.value,
                    event="edit",
                    actor=user,
                    detail={
                        "before": before,
                        "before_hash": before_hash,
                        "after": arguments,
                        "after_hash": new_hash,
                    },
                )
            )
            fresh = await session.get(Proposal, proposal.id, populate_existing=True)
            assert fresh is not None
            return fresh

    # -- the executor's side -----------------------------------------------------------------
    async def start(self, proposal_id: int, worker: str, retry_by: str | None = None) -> Proposal:
        """Claim execution (approved -> executing, or failed -> executing on Retry) with a lease,
        so a worker that dies mid-execution is noticed."""
        async with self.db.transaction() as session:
            proposal = await session.get(Proposal, proposal_id)
            if proposal is None:
                raise UnknownProposal("this action no longer exists")
            event = Event.RETRY if retry_by else Event.START
            return await self._apply(
                session,
                proposal,
                event,
                retry_by or worker,
                {"worker": worker},
                lease_owner=worker,
                lease_expires_at=utcnow() + self.lease,
                attempts=Proposal.attempts + 1,
                error=None,
            )

    async def succeed(self, proposal: Proposal, worker: str, outcome: Outcome) -> Proposal:
        async with self.db.transaction() as session:
            return await self._apply(
                session,
                proposal,
                Event.SUCCEED,
                worker,
                {"summary": outcome.summary, "link": outcome.link},
                result=outcome.result,
                result_link=outcome.link,
                result_summary=outcome.summary,
                lease_owner=None,
                lease_expires_at=None,
            )

    async def fail(self, proposal: Proposal, worker: str, error: str) -> Proposal:
        async with self.db.transaction() as session:
            return await self._apply(
                session,
                proposal,
                Event.FAIL,
                worker,
                {"error": error},
                error=error,
                lease_owner=None,
                lease_expires_at=None,
            )

    # -- the clock and recovery --------------------------------------------------------------
    async def expire_due(self, now: datetime | None = None) -> list[Proposal]:
        now = now or utcnow()
        async with self.db.transaction() as session:
            due = (
                await session.scalars(
                    select(Proposal.id).where(
                        Proposal.state == ProposalState.PROPOSED, Proposal.expires_at <= now
                    )
                )
            ).all()
        expired = []
        for proposal_id in due:
            try:
                async with self.db.transaction() as session:
                    proposal = await session.get(Proposal, proposal_id)
                    if proposal is not None:
                        expired.append(await self._apply(session, proposal, Event.EXPIRE, "clock"))
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
                        Proposal.state == ProposalState.PROPOSED,
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

    async def interrupt_abandoned(self, worker: str, host_prefix: str) -> list[Proposal]:
        """Executions whose lease ran out, or whose worker was an earlier process on this host,
        were cut off by a crash: they become failed ("interrupted") and can be retried."""
        now = utcnow()
        async with self.db.transaction() as session:
            rows = (
                await session.scalars(
                    select(Proposal).where(Proposal.state == ProposalState.EXECUTING)
                )
            ).all()
        interrupted = []
        for proposal in rows:
            expired_lease = (
                proposal.lease_expires_at is not None and proposal.lease_expires_at <= now
            )
            dead_sibling = (
                proposal.lease_owner is not None
                and proposal.lease_owner.startswith(host_prefix)
                and proposal.lease_owner != worker
            )
            if not (expired_lease or dead_sibling):
                continue
            try:
                async with self.db.transaction() as session:
                    interrupted.append(
                        await self._apply(
                            session,
                            proposal,
                            Event.INTERRUPT,
                            "recovery",
                            {"previous_worker": proposal.lease_owner},
                            error="interrupted: the bot stopped while this action was running; "
                            "it may or may not have been carried out. Check, then Retry.",
                            lease_owner=None,
                            lease_expires_at=None,
                        )
                    )
            except AlreadyHandled:
                continue
        return interrupted

    async def approved_waiting(self) -> list[int]:
        async with self.db.transaction() as session:
            rows = await session.scalars(
                select(Proposal.id).where(Proposal.state == ProposalState.APPROVED)
            )
            return list(rows.all())
