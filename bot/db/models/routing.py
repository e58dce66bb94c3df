"""Where a proposal's card went besides its main message: one copy per approver it was routed
to by direct message (the policy's `route: dm`, or approvers who cannot read the thread) and
per person an escalation step notified. Every copy is kept in step with the proposal."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from bot.db.models.base import Base, UTCDateTime, utcnow


class CardCopy(Base):
    __tablename__ = "card_copies"
    __table_args__ = (UniqueConstraint("proposal_id", "recipient"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    proposal_id: Mapped[int] = mapped_column(
        ForeignKey("proposals.id", ondelete="CASCADE"), index=True
    )
    recipient: Mapped[str] = mapped_column(String(32))  # the approver it was sent to
    channel: Mapped[str] = mapped_column(String(32))  # their DM with the bot
    ts: Mapped[str] = mapped_column(String(32))
    reason: Mapped[str] = mapped_column(String(16))  # route | escalation
    # The proposal `version` the copy last showed (behind: it still needs an edit).
    shown_version: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class CardMiss(Base):
    """A person (or place) a proposal's card could not be delivered to, recorded when the
    thread was told so: told once per proposal and recipient, however many times a poster on
    any replica tries again."""

    __tablename__ = "card_misses"
    __table_args__ = (UniqueConstraint("proposal_id", "recipient"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    proposal_id: Mapped[int] = mapped_column(
        ForeignKey("proposals.id", ondelete="CASCADE"), index=True
    )
    # an approver's user id, or where the card itself should have gone (`thread`, `channel`)
    recipient: Mapped[str] = mapped_column(String(32))
    reason: Mapped[str] = mapped_column(String(64))  # Slack's error code, or the failure's kind
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
