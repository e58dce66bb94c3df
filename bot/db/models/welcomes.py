"""Who has been welcomed in their DM with the bot: the welcome is posted once per person, and
this row (written before it is posted) is what a restart or a second replica finds."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from bot.db.models.base import Base, UTCDateTime, utcnow


class Welcome(Base):
    __tablename__ = "welcomes"

    team_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
