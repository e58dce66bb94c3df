"""The card's copies in approvers' direct messages (`CardCopy`): recorded as each is posted,
so a poster taking over from one that died posts only the missing ones, and each copy's shown
version is kept, so copies that fell behind are brought in line by any replica."""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from bot.approvals.ledger import Ledger
from bot.db.models import CardCopy, CardMiss, Proposal


class CardCopies(Ledger):
    async def copies_of(self, proposal_id: int) -> list[CardCopy]:
        async with self.db.transaction() as session:
            rows = await session.scalars(
                select(CardCopy).where(CardCopy.proposal_id == proposal_id).order_by(CardCopy.id)
            )
            return list(rows.all())

    async def add_copy(
        self, proposal_id: int, recipient: str, channel: str, ts: str, reason: str, version: int
    ) -> bool:
        """Record a posted copy; False if that recipient had one already (a racing poster)."""
        try:
            async with self.db.transaction() as session:
                session.add(
                    CardCopy(
                        proposal_id=proposal_id,
                        recipient=recipient,
                        channel=channel,
                        ts=ts,
                        reason=reason,
                        shown_version=version,
                    )
                )
        except IntegrityError:
            return False
        return True

    async def first_miss(self, proposal_id: int, recipient: str, reason: str) -> bool:
        """Record that the card could not reach `recipient`; True only for the first poster
        (of any replica) to record it, who tells the thread."""
        try:
            async with self.db.transaction() as session:
                session.add(
                    CardMiss(proposal_id=proposal_id, recipient=recipient, reason=reason[:64])
                )
        except IntegrityError:
            return False
        return True

    async def copy_shown(self, copy_id: int, version: int) -> None:
        async with self.db.transaction() as session:
            await session.execute(
                update(CardCopy)
                .where(
                    CardCopy.id == copy_id,
                    CardCopy.shown_version.is_(None) | (CardCopy.shown_version < version),
                )
                .values(shown_version=version)
            )

    async def copies_behind(self, limit: int = 50) -> list[int]:
        """Proposals with a copy showing an older state than the proposal has."""
        async with self.db.transaction() as session:
            rows = await session.scalars(
                select(CardCopy.proposal_id)
                .join(Proposal, Proposal.id == CardCopy.proposal_id)
                .where(
                    CardCopy.shown_version.is_(None) | (CardCopy.shown_version < Proposal.version)
                )
                .distinct()
                .limit(limit)
            )
            return list(rows.all())
