"""The files a turn reads, and the messages they become (issue 27, part 1).

Files shared in the thread are read when their message is stored: the message's own (a
`file_share` message event lists them; an `app_mention` does not, so that message is fetched
from Slack) and those of earlier messages imported with the thread. Each becomes one stored
user message, placed before the message that shared it, whose `source` says it is a file
(its name, who shared it, its permalink) and whose audience is the place it was shared in, so
a private channel's file reaches only prompts of people who may read that channel. A text-like
file or a PDF is inlined within a token share (cut with a note); an image is named (its part
is added per request, `bot.files.parts`); anything else is named with its size, unread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.conversation.incoming import SLACK_ID
from bot.db.session import Database
from bot.files.download import Allowance, Downloader, FileHost
from bot.files.store import FileStore, ReadFile, SlackFile
from bot.provenance import Source

log = logging.getLogger(__name__)

MAX_FILES_PER_MESSAGE = 10
MAX_FILES_PER_TURN = 20  # files not read before: past this, a turn names them unread
KIND_WORDS = {"text": "text", "pdf": "a PDF"}


@dataclass(frozen=True)
class FileMessage:
    """A file as the stored message the model reads."""

    content: str
    source: str  # `Source` JSON
    file_id: int | None
    # Who shared it: its message is theirs (`/history forget` removes it with their words).
    sharer: str | None = None


def slack_files(message: Mapping[str, Any]) -> list[SlackFile]:
    """The files a Slack message lists, in Slack's shape; anything else is left out (files
    Slack hides, deleted ones, external links without a private URL)."""
    found: list[SlackFile] = []
    raw = message.get("files")
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, dict) or item.get("mode") in ("tombstone", "hidden_by_limit"):
            continue
        file_id, name = item.get("id"), item.get("name") or item.get("title")
        url = item.get("url_private") or item.get("url_private_download")
        if not (isinstance(file_id, str) and isinstance(url, str) and isinstance(name, str)):
            continue
        size = item.get("size")
        link = item.get("permalink")
        user = item.get("user") or message.get("user")
        found.append(
            SlackFile(
                id=file_id[:32],
                name=name[:255] or "a file",
                url=url,
                size=size if isinstance(size, int) and not isinstance(size, bool) else None,
                permalink=link if isinstance(link, str) else None,
                user=user if isinstance(user, str) else None,
            )
        )
    return found[:MAX_FILES_PER_MESSAGE]


def human_size(size: int | None) -> str:
    if size is None:
        return "size unknown"
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.0f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


class TurnFiles:
    """Reads the files of the messages a turn stores, within one turn's download allowance."""

    def __init__(self, store: FileStore, cut: Callable[[str, int], str], share: int) -> None:
        self.store = store
        self.cut = cut  # (text, tokens) -> at most that many tokens of it
        self.share = share  # tokens a file's text may take

    @classmethod
    def of(
        cls, db: Database, slack: AsyncWebClient, cut: Callable[[str, int], str], share: int
    ) -> TurnFiles:
        downloader = Downloader(str(slack.token or ""), FileHost.for_api(slack.base_url))
        return cls(FileStore(db, downloader), cut, share)

    async def read(
        self, team_id: str, shared: Sequence[tuple[str, Sequence[SlackFile]]], audience: str
    ) -> dict[str, list[FileMessage]]:
        """Slack ts of a message -> its files as messages (ts without files are left out)."""
        allowance = Allowance()
        out: dict[str, list[FileMessage]] = {}
        count = sum(len(files) for _, files in shared)
        skip = max(0, count - MAX_FILES_PER_TURN)  # the oldest ones give way
        for ts, files in shared:
            for file in files:
                if skip:
                    skip -= 1
                    read = ReadFile(file, None, "too many files in one turn")
                else:
                    read = await self.store.read(team_id, file, audience, allowance)
                out.setdefault(ts, []).append(self.message(read))
        return out

    def message(self, read: ReadFile) -> FileMessage:
        found = self._message(read)
        sharer = read.file.user if read.file.user and SLACK_ID.fullmatch(read.file.user) else None
        return FileMessage(found.content, found.source, found.file_id, sharer)

    def _message(self, read: ReadFile) -> FileMessage:
        file, row = read.file, read.row
        source = Source("file", file.name, author=file.user, link=file.permalink).dumps()
        if row is None:
            size = human_size(file.size)
            content = f"{file.name} ({size}): a file that could not be read ({read.problem})."
            return FileMessage(content, source, None)
        size = human_size(row.size)
        if row.kind == "image":
            dims = f", {row.width}×{row.height}" if row.width and row.height else ""
            kind = row.mimetype.removeprefix("image/").upper()
            return FileMessage(f"{file.name}: an image ({kind}{dims}, {size}).", source, row.id)
        if row.text is None:
            what = "a PDF without readable text" if row.kind == "pdf" else "a file of a kind"
            content = f"{file.name} ({size}): {what} I cannot read; not read."
            return FileMessage(content, source, row.id)
        text = self.cut(row.text, self.share)
        note = "" if text == row.text else f"\n[cut: the first {self.share} tokens of the file]"
        header = f"{file.name} ({KIND_WORDS.get(row.kind, row.kind)}, {size}):\n"
        return FileMessage(header + text + note, source, row.id)
