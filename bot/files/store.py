"""Each Slack file read once: looked up by team and Slack file id before any download; a
download whose bytes were read before (same SHA-256, another file id) reuses that reading."""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from bot.db.models import Message, SharedFile
from bot.db.session import Database
from bot.files.download import Allowance, Downloader, Refused
from bot.files.extract import text_of
from bot.files.kinds import sniff


@dataclass(frozen=True)
class SlackFile:
    """A file as a Slack message lists it (only what the bot uses)."""

    id: str
    name: str
    url: str  # url_private (Slack redirects it to the download), else url_private_download
    size: int | None  # what Slack says; shown for files not downloaded
    permalink: str | None
    user: str | None  # who shared it


@dataclass(frozen=True)
class ReadFile:
    """A file after reading: its row, or why it was not read."""

    file: SlackFile
    row: SharedFile | None
    problem: str | None = None


class FileStore:
    def __init__(self, db: Database, downloader: Downloader) -> None:
        self.db = db
        self.downloader = downloader

    async def read(
        self, team_id: str, file: SlackFile, audience: str, allowance: Allowance
    ) -> ReadFile:
        known = await self._by_id(team_id, file.id)
        if known is not None:
            return ReadFile(file, known)
        try:
            got = await self.downloader.fetch(file.url, allowance)
        except Refused as refused:
            return ReadFile(file, None, refused.reason)
        sniffed = sniff(got.data)
        if _sign_in(got.content_type, sniffed.kind, file.name, got.data):
            return ReadFile(
                file, None, "Slack answered its sign-in page (the app may lack files:read)"
            )
        digest = hashlib.sha256(got.data).hexdigest()
        same = await self._by_hash(digest)
        if same is not None:
            text = same.text
        else:  # a PDF can take a while: off the event loop
            text = await asyncio.to_thread(text_of, sniffed.kind, got.data)
        row = SharedFile(
            team_id=team_id,
            slack_file_id=file.id,
            sha256=digest,
            name=file.name[:255],
            kind=sniffed.kind,
            mimetype=sniffed.mimetype,
            size=len(got.data),
            width=sniffed.width,
            height=sniffed.height,
            text=text,
            data=got.data if sniffed.kind == "image" else None,
            audience=audience,
        )
        try:
            async with self.db.transaction() as session:
                session.add(row)
        except IntegrityError:  # read at the same time by another turn or replica
            again = await self._by_id(team_id, file.id)
            if again is None:
                raise
            return ReadFile(file, again)
        return ReadFile(file, row)

    async def image(self, file_id: int) -> SharedFile | None:
        async with self.db.transaction() as session:
            return await session.get(SharedFile, file_id)

    async def _by_id(self, team_id: str, slack_file_id: str) -> SharedFile | None:
        async with self.db.transaction() as session:
            found: SharedFile | None = await session.scalar(
                select(SharedFile).where(
                    SharedFile.team_id == team_id, SharedFile.slack_file_id == slack_file_id
                )
            )
            return found

    async def _by_hash(self, digest: str) -> SharedFile | None:
        async with self.db.transaction() as session:
            found: SharedFile | None = await session.scalar(
                select(SharedFile).where(SharedFile.sha256 == digest).limit(1)
            )
            return found


def _sign_in(content_type: str, kind: str, name: str, data: bytes) -> bool:
    """Slack answers a download it will not serve (no token, or no `files:read`) with its
    sign-in page, HTTP 200: an HTML page where a file that is not HTML was asked for."""
    if content_type != "text/html" or kind != "text" or name.lower().endswith((".html", ".htm")):
        return False
    head = data[:2048].lower()
    return b"<html" in head or b"<!doctype html" in head


async def forget_unused_files(session: AsyncSession) -> int:
    """Delete the files no stored message refers to any more (their conversations were
    removed by retention, or their sharer's messages by `/history forget`): what was read from
    a file is kept no longer than the messages that showed it."""
    used = select(Message.file_id).where(Message.file_id.is_not(None))
    gone = await session.execute(delete(SharedFile).where(SharedFile.id.not_in(used)))
    return int(getattr(gone, "rowcount", 0) or 0)
