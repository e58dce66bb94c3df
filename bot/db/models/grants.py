"""Grants made from a card ("Approve for this thread", "… for this channel", "Always for
me"): one requester's later calls of one tool definition, in one scope, run without a card."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from bot.db.models.base import Base, UTCDateTime, utcnow


class Grant(Base):
    __tablename__ = "grants"
    __table_args__ = (Index("ix_grants_cover", "team_id", "requester", "tool_name"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    team_id: Mapped[str] = mapped_column(String(32))
    tool_name: Mapped[str] = mapped_column(String(255))
    definition: Mapped[str] = mapped_column(String(100))  # the tool's definition hash
    requester: Mapped[str] = mapped_column(String(32))  # whose calls it covers
    scope: Mapped[str] = mapped_column(String(8))  # thread | channel | me
    channel_id: Mapped[str | None] = mapped_column(String(32))  # thread and channel scopes
    thread_ts: Mapped[str | None] = mapped_column(String(32))  # thread scope
    granted_by: Mapped[str] = mapped_column(String(32))
    rule: Mapped[str | None] = mapped_column(String(255))
    proposal_id: Mapped[int | None] = mapped_column(
        ForeignKey("proposals.id", ondelete="SET NULL"), index=True
    )
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    revoked_by: Mapped[str | None] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
