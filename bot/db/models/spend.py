"""Spend: turns paused at a budget's limit (`budget_pauses`). The ledger's own tables (what
each budget used and holds per window, each call's reservation) live here too."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from bot.db.models.base import Base, UTCDateTime, utcnow


class BudgetPause(Base):
    """A turn that stopped before a model call because a budget had no room: its card, and
    how it ends. `state`: paused -> resumed (a raise was approved, or the person chose the
    cheaper model: `model` names it) | abandoned (the window reset, or nobody acted). Moves
    are compare-and-set on `state` and `version`, so a turn resumes once."""

    __tablename__ = "budget_pauses"
    __table_args__ = (Index("ix_budget_pauses_budget", "budget", "window_key", "state"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    team_id: Mapped[str] = mapped_column(String(32))
    conversation_id: Mapped[int | None] = mapped_column(
        ForeignKey("conversations.id", ondelete="SET NULL"), index=True
    )
    requester: Mapped[str] = mapped_column(String(32), index=True)
    channel_id: Mapped[str] = mapped_column(String(32))
    thread_ts: Mapped[str | None] = mapped_column(String(32))
    turn_key: Mapped[str] = mapped_column(String(128))
    budget: Mapped[str] = mapped_column(String(100))  # the budget's name
    window_key: Mapped[str] = mapped_column(String(128))
    card_ts: Mapped[str | None] = mapped_column(String(32))  # the pause card's message
    state: Mapped[str] = mapped_column(String(16), default="paused")
    model: Mapped[str | None] = mapped_column(String(200))  # set when continued on a cheaper one
    # The raise asked from this pause (a proposal of the `budget_raise` action), if any.
    raise_proposal_id: Mapped[int | None] = mapped_column(
        ForeignKey("proposals.id", ondelete="SET NULL")
    )
    decided_by: Mapped[str | None] = mapped_column(String(32))
    note: Mapped[str | None] = mapped_column(Text)
    version: Mapped[int] = mapped_column(Integer, default=1)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    resumed_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
