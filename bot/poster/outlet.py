"""A live reply's destination (`bot.poster`): its check decided once per audience."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot.poster.checks import PostRefused
from bot.text import defuse, defuse_blocks

if TYPE_CHECKING:
    from bot.poster import Poster


class Outlet:
    """One live reply's destination. The check is decided once per audience the reply carries
    (a reply carries one or two in its life) and remembered: its edits, appends and stops
    cost no look-up."""

    def __init__(self, poster: Poster, channel: str, thread_ts: str | None, reader: str | None):
        self.poster = poster
        self.channel = channel
        self.thread_ts = thread_ts
        self.reader = reader
        self._decided: dict[str, bool] = {}
        self._deciding = asyncio.Lock()  # the reply's pump and its owner may ask at once

    async def cleared(self, carries: str) -> bool:
        found = self._decided.get(carries)
        if found is not None:
            return found
        async with self._deciding:  # one look-up per audience, however many ask at once
            found = self._decided.get(carries)
            if found is None:
                found = await self.poster.cleared(self.channel, carries, self.reader)
                self._decided[carries] = found
                if not found:
                    self.poster.refuse(self.channel, carries)  # logged once per reply
        return found

    async def _allow(self, carries: str) -> None:
        if not await self.cleared(carries):
            raise PostRefused(self.channel, carries)

    async def post(
        self, text: str, *, carries: str, blocks: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """A message of the reply in its thread (a continuation, or its first post), posted
        once although Slack's answer may be lost (`Poster.post_once`)."""
        await self._allow(carries)
        return await self.poster.post_once(self.channel, text, self.thread_ts, blocks)

    async def update(
        self, ts: str, text: str, *, carries: str, blocks: list[dict[str, Any]] | None = None
    ) -> AsyncSlackResponse:
        await self._allow(carries)
        if blocks is None:
            return await self.poster.slack.chat_update(
                channel=self.channel, ts=ts, text=defuse(text)
            )
        return await self.poster.slack.chat_update(
            channel=self.channel, ts=ts, text=defuse(text), blocks=defuse_blocks(blocks)
        )

    async def start_stream(
        self, recipient_user: str, recipient_team: str, *, carries: str
    ) -> AsyncSlackResponse:
        """A native stream in the reply's thread (no text yet)."""
        await self._allow(carries)
        return await self.poster.slack.chat_startStream(
            channel=self.channel,
            thread_ts=self.thread_ts or "",
            recipient_user_id=recipient_user,
            recipient_team_id=recipient_team,
            task_display_mode="timeline",
        )

    async def append_stream(
        self, ts: str, markdown_text: str | None, chunks: list[Any] | None, *, carries: str
    ) -> AsyncSlackResponse:
        await self._allow(carries)
        return await self.poster.slack.chat_appendStream(
            channel=self.channel,
            ts=ts,
            markdown_text=defuse(markdown_text) if markdown_text else None,
            chunks=chunks,
        )

    async def stop_stream(
        self,
        ts: str,
        *,
        carries: str,
        markdown_text: str | None = None,
        chunks: list[Any] | None = None,
        blocks: list[dict[str, Any]] | None = None,
    ) -> AsyncSlackResponse:
        await self._allow(carries)
        return await self.poster.slack.chat_stopStream(
            channel=self.channel,
            ts=ts,
            blocks=defuse_blocks(blocks) if blocks is not None else None,
            markdown_text=defuse(markdown_text) if markdown_text else None,
            chunks=chunks,
        )
