"""The approvals' side of grants: a vote that approves with a grant button leaves one, and a
live grant approves a covered proposal at once, both through the normal state machine and
the audit chain (in the caller's transaction, which holds the chain's lock first)."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from bot.approvals import grants
from bot.approvals.errors import AlreadyHandled
from bot.approvals.ledger import Ledger
from bot.approvals.questions import turn_key
from bot.db.models import Grant, Proposal


class Granting(Ledger):
    async def approve_by_grant(
        self, session: AsyncSession, proposal: Proposal, grant_id: int
    ) -> tuple[Proposal, Grant]:
        """A live grant covers it (the one door said so): approved at once, in the proposing
        transaction, by `grant:ID` (one vote), through the same transition as a person's
        approval."""
        grant = await session.get(Grant, grant_id)
        if grant is None:
            raise AlreadyHandled("the grant that covered this action is gone")
        detail = {
            "grant": grant.id,
            "granted_by": grant.granted_by,
            "scope": grant.scope,
            "definition": grant.definition,
            "rule": grant.rule,
            "rule_hash": grant.rule_hash,
        }
        approved = await self.approve_unclicked(session, proposal, f"grant:{grant.id}", detail)
        return approved, grant

    async def leave_grant(
        self, session: AsyncSession, approved: Proposal, scope: str, user: str, four_eyes: bool
    ) -> Grant | None:
        """The grant `user`'s approving vote leaves, if the proposal's rule (as the one door
        last recorded it on the proposal) offers `scope`. Bound to that rule, its content,
        requirements and the call's audience; in a DM's timeline, to this turn."""
        kept = approved.policy or {}
        four_eyes = four_eyes or bool(kept.get("four_eyes"))
        mine = grants.self_approves(kept.get("approvers") or (), four_eyes, approved.requester)
        if kept.get("failed_closed") or scope not in grants.offered(approved.policy, mine):
            return None
        turn = None
        if not approved.thread_ts:
            turn = await turn_key(session, approved.conversation_id, approved.assistant_message_id)
        made = grants.make(session, approved, scope, user, turn)
        await session.flush()
        await self.note_in(
            session,
            approved,
            "grant",
            user,
            {"grant": made.id, "scope": scope, "requester": made.requester},
        )
        return made
