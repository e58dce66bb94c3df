"""People's side of the machine: proposing, voting, declining and asking for changes
(editing a proposal is `bot.approvals.editing`).

A card shows one revision of the arguments and its buttons carry that revision number. A vote,
a decline or an edit names the revision its author saw; if the proposal has moved on to another
revision, nothing changes (`CardChanged`). An edit makes a new revision and voids every earlier
vote; under four-eyes its author may not approve it.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from bot.approvals.errors import (
    AlreadyHandled,
    CardChanged,
    NotAuthorised,
    UnknownProposal,
    describe_state,
)
from bot.approvals.granting import Granting
from bot.approvals.ledger import vote
from bot.approvals.machine import Event, State
from bot.db.audit_chain import append, lock_head
from bot.db.models import Proposal, ProposalApproval, utcnow
from bot.tools.registry import Preview, arguments_hash


@dataclass(frozen=True)
class VoteResult:
    proposal: Proposal
    approvers: list[str]
    approved_now: bool


class Decisions(Granting):
    async def propose(
        self,
        session: AsyncSession,
        *,
        team_id: str,
        conversation_id: int | None,
        assistant_message_id: int | None,
        result_message_id: int | None,
        tool_call_id: str,
        tool_name: str,
        arguments: dict[str, Any],
        preview: Preview,
        requester: str,
        channel_id: str,
        thread_ts: str | None,
        expires_in: timedelta,
        policy: dict[str, Any] | None = None,
    ) -> Proposal:
        """A proposal of the model's call (its assistant and `tool` messages), or of an
        action the bot asks on a person's behalf (no messages: a budget raise), whose
        settling resumes no model turn."""
        proposal = Proposal(
            policy=policy,
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
            pin=preview.pin,
            resolved=preview.resolved,
            requester=requester,
            idempotency_key=secrets.token_hex(16),
            state=State.PROPOSED,
            version=1,
            revision=1,
            expires_at=utcnow() + expires_in,
            channel_id=channel_id,
            thread_ts=thread_ts,
        )
        session.add(proposal)
        await session.flush()
        await append(
            session,
            team_id=team_id,
            proposal_id=proposal.id,
            from_state=None,
            to_state=State.PROPOSED.value,
            event="propose",
            actor=requester,
            detail={
                "arguments": arguments,
                "arguments_hash": proposal.arguments_hash,
                "revision": 1,
                "resolved": preview.resolved,
                **({"policy": policy} if policy else {}),
            },
        )
        return proposal

    async def approve_by_rule(
        self, session: AsyncSession, proposal: Proposal, rule: str, version: str
    ) -> Proposal:
        """A policy rule allowed it: approved at once, in the proposing transaction, by
        `policy:RULE` (one vote, so the executor's check of the approvals on record holds)."""
        detail = {"rule": rule, "policy_version": version}
        return await self.approve_unclicked(session, proposal, f"policy:{rule}"[:255], detail)

    @asynccontextmanager
    async def _deciding(
        self, proposal_id: int, revision: int | None
    ) -> AsyncIterator[tuple[AsyncSession, Proposal]]:
        """The locked proposal, still waiting and at the revision the person saw, inside one
        transaction. If its time is up, it expires instead (committed, so the refusal does not
        roll the expiry back)."""
        async with self.db.transaction() as session:
            team = await session.scalar(select(Proposal.team_id).where(Proposal.id == proposal_id))
            if team is not None:
                await lock_head(session, team)  # the chain's lock before the proposal's
            proposal = await session.get(Proposal, proposal_id, with_for_update=True)
            if proposal is None:
                raise UnknownProposal("this action no longer exists")
            if State(proposal.state) is State.PROPOSED and proposal.expires_at <= utcnow():
                await self._apply(session, proposal, Event.EXPIRE, "clock")
            else:
                if State(proposal.state) is not State.PROPOSED:
                    raise AlreadyHandled(f"This action was {describe_state(proposal)}.")
                if revision is not None and revision != proposal.revision:
                    raise CardChanged()
                yield session, proposal
                return
        raise AlreadyHandled("This action expired before anyone decided; nothing was done.")

    async def vote(
        self,
        proposal_id: int,
        revision: int,
        user: str,
        approvals_required: int,
        four_eyes: bool = False,
        digest: str | None = None,
        grant: str | None = None,
    ) -> VoteResult:
        """Record `user`'s approval of `revision`; the quorum's last vote moves the proposal to
        approved and freezes that revision's arguments (and hash) for the executor. `digest`:
        the arguments' digest the clicked card showed; arguments whose hash does not start with
        it are not the ones the clicker saw, and the vote counts for nothing. `grant` (thread,
        channel, me): a vote that approves also leaves a grant of that scope, if the
        proposal's rule offers it."""
        async with self._deciding(proposal_id, revision) as (session, proposal):
            if digest is not None and not (digest and proposal.arguments_hash.startswith(digest)):
                raise CardChanged()
            if four_eyes and user in (proposal.requester, proposal.revised_by):
                raise NotAuthorised(
                    "this action needs someone other than the person who asked for it or last "
                    "edited it to approve it"
                )
            try:
                async with session.begin_nested():
                    session.add(vote(proposal, user))
            except IntegrityError:
                raise AlreadyHandled("You have already approved this action.") from None
            approvers = list(
                (
                    await session.scalars(
                        select(ProposalApproval.approver)
                        .where(
                            ProposalApproval.proposal_id == proposal.id,
                            ProposalApproval.revision == proposal.revision,
                        )
                        .order_by(ProposalApproval.id)
                    )
                ).all()
            )
            detail = {
                "votes": len(approvers),
                "required": approvals_required,
                "revision": proposal.revision,
                "arguments_hash": proposal.arguments_hash,
            }
            if len(approvers) < approvals_required:
                await self.note_in(session, proposal, "vote", user, detail)
                return VoteResult(proposal, approvers, approved_now=False)
            approved = await self._apply(
                session,
                proposal,
                Event.APPROVE,
                user,
                {**detail, "approvers": approvers},
                approved_arguments=proposal.arguments,
                approved_hash=proposal.arguments_hash,
                approved_revision=proposal.revision,
                decided_by=user,
                decided_at=utcnow(),
            )
            if grant is not None and approvals_required == 1:  # grants need one approval
                await self.leave_grant(session, approved, grant, user, four_eyes)
            return VoteResult(approved, approvers, approved_now=True)

    async def decline(
        self, proposal_id: int, user: str, reason: str | None, revision: int | None = None
    ) -> Proposal:
        return await self._close(proposal_id, Event.DECLINE, user, "reason", reason, revision)

    async def ask_changes(
        self, proposal_id: int, user: str, note: str, revision: int | None = None
    ) -> Proposal:
        """Send the proposal back with `note`: nothing runs and no grant is made; the model
        reads the note and may propose a revised action, which gets a card of its own."""
        return await self._close(proposal_id, Event.ASK_CHANGES, user, "note", note, revision)

    async def _close(
        self,
        proposal_id: int,
        event: Event,
        user: str,
        key: str,
        text: str | None,
        revision: int | None,
    ) -> Proposal:
        """A person's decision that runs nothing, with their words (stored in `decline_reason`
        and in the audit row under `key`)."""
        async with self._deciding(proposal_id, revision) as (session, proposal):
            return await self._apply(
                session,
                proposal,
                event,
                user,
                {key: text, "revision": proposal.revision},
                decided_by=user,
                decided_at=utcnow(),
                decline_reason=text,
            )
