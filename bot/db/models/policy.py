"""Every decision the policy file made on a write call, enforced or shadow: what `policy
replay` reads back and what the conditions' counts (`calls_in_thread`, `calls_today`) count."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from bot.db.models.base import Base, UTCDateTime, utcnow


class PolicyDecision(Base):
    __tablename__ = "policy_decisions"
    __table_args__ = (
        Index("ix_policy_decisions_thread", "channel_id", "thread_ts", "tool_name"),
        Index("ix_policy_decisions_requester", "requester", "tool_name", "created_at"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    team_id: Mapped[str] = mapped_column(String(32))
    channel_id: Mapped[str] = mapped_column(String(32))
    thread_ts: Mapped[str | None] = mapped_column(String(32))
    requester: Mapped[str] = mapped_column(String(32))
    tool_name: Mapped[str] = mapped_column(String(255))
    pack: Mapped[str] = mapped_column(String(255), default="")
    arguments: Mapped[dict[str, Any]] = mapped_column(JSON)
    groups: Mapped[list[str]] = mapped_column(JSON, default=list)
    calls_in_thread: Mapped[int] = mapped_column(default=0)
    calls_today: Mapped[int] = mapped_column(default=0)
    outcome: Mapped[str] = mapped_column(String(8))  # allow | deny | ask
    rule: Mapped[str | None] = mapped_column(String(255))
    policy_version: Mapped[str] = mapped_column(String(64))
    reason: Mapped[str | None] = mapped_column(Text)
    shadow: Mapped[list[str] | None] = mapped_column(JSON)
    # NULL for a deny (no proposal is made); SET NULL once a proposal is purged.
    proposal_id: Mapped[int | None] = mapped_column(
        ForeignKey("proposals.id", ondelete="SET NULL"), index=True
    )
    # Which step decided which revision: the proposal's (`propose`, what the counts count),
    # an Edit's, a click's, an escalation's, a reload's, the start of execution's.
    step: Mapped[str] = mapped_column(String(16), default="propose", server_default="propose")
    revision: Mapped[int] = mapped_column(default=1, server_default="1")
    actor: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, index=True)
