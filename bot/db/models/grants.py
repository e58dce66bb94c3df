"""Grants made from a card ("Approve for this thread", "… for this channel", "Always for
me"): one requester's later calls of one tool definition, in one scope, run without a card."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, ForeignKey, Index, String, Text, false
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
    # What it was made under: a grant covers a call only under the same rule, unchanged
    # (`rule_hash`), and a reload that changes the rule voids it (`voided_at`, `void_reason`).
    rule_hash: Mapped[str | None] = mapped_column(String(64))
    policy_version: Mapped[str | None] = mapped_column(String(64))
    approvers: Mapped[list[Any] | None] = mapped_column(JSON)
    approvals_required: Mapped[int] = mapped_column(default=1, server_default="1")
    four_eyes: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    audience: Mapped[str | None] = mapped_column(Text)  # of the call it was made on
    voided_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    void_reason: Mapped[str | None] = mapped_column(Text)
    proposal_id: Mapped[int | None] = mapped_column(
        ForeignKey("proposals.id", ondelete="SET NULL"), index=True
    )
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    revoked_by: Mapped[str | None] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
