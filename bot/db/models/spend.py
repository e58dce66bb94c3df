"""Spend: turns paused at a budget's limit (`budget_pauses`). The ledger's own tables (what
each budget used and holds per window, each call's reservation) live here too."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from bot.db.models.base import Base, UTCDateTime, utcnow


class BudgetPause(Base):
    """A turn that stopped before a model call because a budget had no room: its card, and
    how it ends. `state`: paused -> resumed (a raise was approved, or the person chose the
    cheaper model: `model` names it) | abandoned (the window reset: `resets_at` passed, seen
    by the sweeper or at a click, bot/slack/pause_ends.py). Moves are compare-and-set on
    `state` and `version`, so a turn resumes once and never after its window."""

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
    # When that window resets, as it was when the turn paused (a reload may change or drop the
    # budget, not the window it stopped in); None for a turn window, and for pauses stored
    # before it was kept (their budget's window is read then).
    resets_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
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


class SpendWindow(Base):
    """One budget in one window (a calendar day, ISO week or month in its time zone, or a
    turn): what settled calls used, what calls in flight hold, and the raises approved for
    this window only. Reservations lock these rows (in budget-name order), so holds never pass
    a limit across replicas. Money in nano-dollars."""

    __tablename__ = "spend_windows"
    __table_args__ = (UniqueConstraint("budget", "window_key"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    budget: Mapped[str] = mapped_column(String(100))
    window_key: Mapped[str] = mapped_column(String(128))
    used_nano: Mapped[int] = mapped_column(BigInteger, default=0)
    reserved_nano: Mapped[int] = mapped_column(BigInteger, default=0)
    used_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    reserved_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    raised_nano: Mapped[int] = mapped_column(BigInteger, default=0)
    raised_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    # An approved "raise to" (bot/tools/packs/budgets.py): the window's limit is the higher of
    # it and the policy's limit read now (a reload never stacks on an approved amount).
    raised_to_nano: Mapped[int | None] = mapped_column(BigInteger)
    raised_to_tokens: Mapped[int | None] = mapped_column(BigInteger)
    # When the soft threshold's notice was claimed (compare-and-set from NULL): once a window.
    soft_noticed_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    version: Mapped[int] = mapped_column(Integer, default=1)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    # The room processes hold as leases (the sum of their `spend_leases` rows' room), and the
    # reclaim generation: a call refused while others' leases hold room bumps it, and every
    # holder returns its unused room when it sees it move (bot/spend/leases.py).
    leased_nano: Mapped[int] = mapped_column(BigInteger, default=0)
    leased_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    reclaim: Mapped[int] = mapped_column(Integer, default=0)


class SpendLease(Base):
    """One process's share of one window's room (bot/spend/leases.py): granted under the
    window row's lock, so used + reserved + leased never passes the limit; calls then take
    from it in memory. `renewed_at` moves while the holder lives; a lease not renewed for long
    is charged whole by the sweeper (its holder died: what it took is unknown)."""

    __tablename__ = "spend_leases"
    __table_args__ = (UniqueConstraint("window_id", "holder"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    window_id: Mapped[int] = mapped_column(Integer, index=True)
    holder: Mapped[str] = mapped_column(String(64))
    room_nano: Mapped[int] = mapped_column(BigInteger, default=0)
    room_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    renewed_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class SpendReservation(Base):
    """One model call's hold: `state` held -> settled (to the usage the server reported, else
    the count made here) | released (a call that never settled, charged its whole estimate).
    Moves are compare-and-set on `state`, so a call is charged once. `holds` names the windows
    it holds: [{"window": spend_windows.id, "budget": name, "scope": kind}]."""

    __tablename__ = "spend_reservations"
    __table_args__ = (Index("ix_spend_reservations_state", "state", "created_at"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    model: Mapped[str] = mapped_column(String(200))
    state: Mapped[str] = mapped_column(String(16), default="held")
    team_id: Mapped[str] = mapped_column(String(32))
    user_id: Mapped[str] = mapped_column(String(32))
    turn_key: Mapped[str] = mapped_column(String(128), index=True)
    holds: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    estimate_nano: Mapped[int] = mapped_column(BigInteger)
    estimate_tokens: Mapped[int] = mapped_column(BigInteger)
    # What it was charged when it settled, and from what: reported | counted | estimate.
    prompt_tokens: Mapped[int | None] = mapped_column(BigInteger)
    completion_tokens: Mapped[int | None] = mapped_column(BigInteger)
    charged_nano: Mapped[int | None] = mapped_column(BigInteger)
    charged_from: Mapped[str | None] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    settled_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class SpendRaise(Base):
    """An approved raise of one budget's limits for one window, recorded under its
    idempotency key: applying the same approval twice adds once."""

    __tablename__ = "spend_raises"

    id: Mapped[int] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(String(200), unique=True)
    budget: Mapped[str] = mapped_column(String(100))
    window_key: Mapped[str] = mapped_column(String(128))
    nano: Mapped[int] = mapped_column(BigInteger, default=0)
    tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
