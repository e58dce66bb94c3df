"""Where each proposal's card is and what it shows: one poster per card (a claim), and the
version the card last showed, so cards that fell behind (a failed edit, a crash) are found and
brought in line by any replica."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, select, update

from bot.approvals.ledger import Ledger
from bot.db.models import Proposal, utcnow
from bot.states import State

CARD_CLAIM = timedelta(minutes=3)


@dataclass(frozen=True)
class CardClaim:
    takeover: bool  # an earlier poster's claim lapsed: its card may exist already


class CardState(Ledger):
    async def set_card(self, proposal_id: int, channel: str, ts: str) -> None:
        async with self.db.transaction() as session:
            await session.execute(
                update(Proposal)
                .where(Proposal.id == proposal_id)
                .values(card_channel=channel, card_ts=ts)
            )

    async def claim_card(self, proposal_id: int) -> CardClaim | None:
        """The right to post this proposal's card (one poster, whichever process tries) for
        `CARD_CLAIM`, longer than a post with all its retries may take; None while someone
        holds it or once the card is posted. A claim taken over from a poster whose claim
        lapsed says so: that poster may have posted before it died, so look for its card."""
        now = utcnow()
        async with self.db.transaction() as session:
            proposal = await session.get(Proposal, proposal_id)
            if proposal is None or proposal.card_channel not in (None, ""):
                return None
            takeover = proposal.card_channel == ""
            if takeover and proposal.card_claimed_until and proposal.card_claimed_until > now:
                return None
            # The compare-and-set: whoever claimed or posted meanwhile makes this match nothing.
            result = await session.execute(
                update(Proposal)
                .where(Proposal.id == proposal_id, self._card_unposted(now))
                .values(card_channel="", card_claimed_until=now + CARD_CLAIM)
            )
            if getattr(result, "rowcount", 0) != 1:
                return None  # another poster claimed it first
            return CardClaim(takeover)

    @staticmethod
    def _card_unposted(now: datetime) -> ColumnElement[bool]:
        """No card yet: never claimed, or claimed by a poster whose claim lapsed."""
        lapsed = (Proposal.card_channel == "") & (
            Proposal.card_claimed_until.is_(None) | (Proposal.card_claimed_until <= now)
        )
        return Proposal.card_channel.is_(None) | lapsed

    async def release_card(self, proposal_id: int) -> None:
        """Posting failed: let a later sweep try again."""
        async with self.db.transaction() as session:
            await session.execute(
                update(Proposal)
                .where(Proposal.id == proposal_id, Proposal.card_channel == "")
                .values(card_channel=None, card_claimed_until=None)
            )

    async def cards_missing(self, older_than: timedelta = timedelta(seconds=5)) -> list[Proposal]:
        """Waiting proposals whose card was never posted (Slack failed, or the process died)."""
        async with self.db.transaction() as session:
            rows = await session.scalars(
                select(Proposal)
                .where(
                    Proposal.state == State.PROPOSED,
                    self._card_unposted(utcnow()),
                    Proposal.created_at <= utcnow() - older_than,
                )
                .limit(50)
            )
            return list(rows.all())

    async def card_shown(self, proposal_id: int, version: int) -> None:
        """The card in Slack now shows `version` of the proposal."""
        async with self.db.transaction() as session:
            await session.execute(
                update(Proposal)
                .where(
                    Proposal.id == proposal_id,
                    Proposal.card_version.is_(None) | (Proposal.card_version < version),
                )
                .values(card_version=version)
            )

    async def cards_behind(self, limit: int = 50) -> list[int]:
        """Proposals whose card shows an older state than they have (an edit that failed or
        was cut off by a crash); the sweeper brings them in line."""
        async with self.db.transaction() as session:
            rows = await session.scalars(
                select(Proposal.id)
                .where(
                    Proposal.card_ts.is_not(None),
                    (Proposal.card_version.is_(None)) | (Proposal.card_version < Proposal.version),
                )
                .order_by(Proposal.updated_at.desc())
                .limit(limit)
            )
            return list(rows.all())
