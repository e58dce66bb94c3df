"""Files shared in Slack threads, each read once (issue 27): what the bot took from it, and
who may read it.

A row is one Slack file (team + Slack file id): downloaded once, its type checked by its
bytes, its text extracted once (a PDF's too). Content already read under another file id
(the same bytes, by SHA-256) is not extracted again. Images keep their bytes (at most the
per-file cap), since every model request that shows one sends it again as an image part.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Integer, LargeBinary, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from bot.db.models.base import Base, UTCDateTime, utcnow


class SharedFile(Base):
    __tablename__ = "shared_files"
    __table_args__ = (UniqueConstraint("team_id", "slack_file_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    team_id: Mapped[str] = mapped_column(String(32))
    slack_file_id: Mapped[str] = mapped_column(String(32))
    sha256: Mapped[str] = mapped_column(String(64), index=True)
    name: Mapped[str] = mapped_column(String(255))
    # By its bytes: image | text | pdf | other (`bot.files.kinds`)
    kind: Mapped[str] = mapped_column(String(16))
    mimetype: Mapped[str] = mapped_column(String(64))  # from the bytes, not Slack's
    size: Mapped[int] = mapped_column(Integer)
    width: Mapped[int | None] = mapped_column(Integer)  # images, when the header says
    height: Mapped[int | None] = mapped_column(Integer)
    text: Mapped[str | None] = mapped_column(Text)  # text-like files and PDFs
    data: Mapped[bytes | None] = mapped_column(LargeBinary)  # images only
    # Who may read it (`bot.audience`): the place it was first shared in.
    audience: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
