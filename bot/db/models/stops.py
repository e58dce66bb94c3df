"""The Stop journal: a person's Stop of a thread, written before anything of it is done and
marked done once its proposals are withdrawn, so a crash in between leaves nothing waiting:
recovery completes every Stop the journal still holds open."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from bot.db.models.base import Base, UTCDateTime, utcnow


class StopEntry(Base):
    __tablename__ = "stop_journal"

    id: Mapped[int] = mapped_column(primary_key=True)
    team_id: Mapped[str] = mapped_column(String(32))
    channel_id: Mapped[str] = mapped_column(String(32))
    thread_ts: Mapped[str] = mapped_column(String(32))
    user_id: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    done_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), index=True)
