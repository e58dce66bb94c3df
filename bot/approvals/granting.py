"""The approvals' side of grants: a vote that approves with a grant button leaves one, and a
live grant approves a covered proposal at once, both through the normal state machine and
the audit chain (in the caller's transaction, which holds the chain's lock first)."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from bot.approvals import grants
from bot.approvals.ledger import Ledger
from bot.db.models import Grant, Proposal


class Granting(Ledger):
    async def approve_by_grant(
        self, session: AsyncSession, proposal: Proposal, grant: Grant
    ) -> Proposal:
        """A live grant covers it: approved at once, in the proposing transaction, by
        `grant:ID` (one vote), through the same transition as a person's approval."""
        detail = {
            "grant": grant.id,
            "granted_by": grant.granted_by,
            "scope": grant.scope,
            "definition": grant.definition,
        }
        return await self.approve_unclicked(session, proposal, f"grant:{grant.id}", detail)

    async def leave_grant(
        self, session: AsyncSession, approved: Proposal, scope: str, user: str, four_eyes: bool
    ) -> Grant | None:
        """The grant `user`'s approving vote leaves, if the proposal's rule offers `scope`."""
        kept = approved.policy or {}
        four_eyes = four_eyes or bool(kept.get("four_eyes"))
        mine = grants.self_approves(kept.get("approvers") or (), four_eyes, approved.requester)
        if scope not in grants.offered(approved.policy, mine):
            return None
        made = grants.make(session, approved, scope, user)
        await session.flush()
        await self.note_in(
            session,
            approved,
            "grant",
            user,
            {"grant": made.id, "scope": scope, "requester": made.requester},
        )
        return made
