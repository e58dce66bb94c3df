"""The one way the bot posts to Slack: every message about a turn or a proposal (replies and
their edits and streams, cards, notes, reminders, escalation notices, private words, approved
writes) goes through `Poster`, and no other module calls Slack's post, update, ephemeral,
schedule or streaming methods (tests/test_one_poster.py reads the source to hold it).

Every call states what it carries (an audience of `bot.audience`, or `NOTHING_PRIVATE`) and
where it goes. Before Slack is called the poster checks that everyone who reads the destination
may read what it carries (`Reach.covers`: a channel for a channel's message, the one person of
a DM, the one recipient of an ephemeral message); otherwise it refuses with `PostRefused` and
logs the destination and the audience's clauses, never the text. One exception: an
`ApprovedWrite`, a person's approval of exactly this text for exactly this destination (the
`slack` pack's writes), is sent and logged.

Neutral ground (like `bot.membership`): the tools reach it through their `ToolContext`, the
Slack surface and the conversation directly. A live reply asks through an `Outlet`, which
decides once per audience it carries, not once per edit.

Broadcast pings (`<!channel>`, `<!here>`, `<!everyone>`, `<!subteam^…>`) are defused in every
text and block the poster sends: the callers escape model text already (`bot.text.escape`),
and nothing the bot sends has a reason to ping a channel.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot import audience
from bot.keyed_messages import post_keyed, single_attempt
from bot.membership import Reach, reach_of
from bot.text import defuse, defuse_blocks

log = logging.getLogger(__name__)

# What a message made only of the bot's own words (and ids, names, links) carries.
NOTHING_PRIVATE = audience.WORKSPACE


class PostRefused(Exception):
    """What a message carries may not be read by everyone where it would go."""

    def __init__(self, channel: str, carries: str) -> None:
        super().__init__(f"not posted to {channel}: it carries what not all its readers may read")
        self.channel = channel
        self.carries = carries


@dataclass(frozen=True)
class ApprovedWrite:
    """A person approved exactly this text for exactly this destination: the card of the
    proposal whose idempotency key this is. Only an approved write's tool passes one."""

    proposal_key: str


class Poster:
    """Posts for one Slack client; shares that client's `Reach` (and its caches)."""

    def __init__(self, slack: AsyncWebClient, reach: Reach | None = None) -> None:
        self.slack = slack
        self.reach = reach or reach_of(slack)

    # -- the check -----------------------------------------------------------------------
    async def _place(self, channel: str, reader: str | None) -> str | None:
        """Who reads `channel` (`bot.audience.place`): a DM is its one person's, named by the
        caller that opened it or by Slack; None when nobody can say."""
        if not channel.startswith("D"):
            return audience.channel(channel)
        if reader:
            return audience.person(reader)
        try:
            user = (await self.reach.channel_info(channel)).get("user")
        except Exception as exc:  # unknown reader: only what carries nothing private goes
            log.warning("could not look up DM %s: %s", channel, type(exc).__name__)
            return None
        return audience.person(str(user)) if user else None

    async def cleared(self, channel: str, carries: str, reader: str | None = None) -> bool:
        """Whether everyone who reads `channel` may read data of `carries` (a channel's own
        data is always for its readers; `reader`: the person of a DM, if known)."""
        rest = audience.clauses(carries) - {audience.channel(channel)}
        if not rest:
            return True
        place = await self._place(channel, reader)
        return place is not None and await self.reach.covers(place, " ".join(sorted(rest)))

    async def _allow(
        self,
        channel: str,
        carries: str,
        reader: str | None = None,
        approved: ApprovedWrite | None = None,
    ) -> None:
        if await self.cleared(channel, carries, reader):
            return
        if approved is not None and approved.proposal_key:
            log.info(
                "posting to %s under approval %s: it carries %s, wider than its readers",
                channel,
                approved.proposal_key,
                carries,
            )
            return
        raise self.refuse(channel, carries)

    @staticmethod
    def refuse(channel: str, carries: str) -> PostRefused:
        log.warning(
            "refused a post to %s: it carries %s, not for all its readers", channel, carries
        )
        return PostRefused(channel, carries)

    # -- messages ------------------------------------------------------------------------
    async def post(
        self,
        channel: str,
        text: str,
        *,
        carries: str,
        thread_ts: str | None = None,
        blocks: list[dict[str, Any]] | None = None,
        metadata: dict[str, Any] | None = None,
        reader: str | None = None,
        approved: ApprovedWrite | None = None,
    ) -> dict[str, Any]:
        """A new message (link previews off: Slack must not fetch what the bot shows), posted
        once although Slack's answer may be lost (`post_keyed`, under the metadata's key when
        it carries one). An approved write's own post is left to its executor, which tells a
        lost answer as an unknown outcome and finds the earlier write on Retry."""
        await self._allow(channel, carries, reader, approved)
        once = self.slack if approved is not None else single_attempt(self.slack)

        def send(marked: dict[str, Any] | None) -> Awaitable[AsyncSlackResponse]:
            return once.chat_postMessage(
                channel=channel,
                thread_ts=thread_ts,
                text=defuse(text),
                blocks=defuse_blocks(blocks) if blocks is not None else None,
                metadata=marked,
                unfurl_links=False,
                unfurl_media=False,
            )

        if approved is not None:
            answer = await send(metadata)
            return dict(answer.data) if isinstance(answer.data, dict) else {"ok": True}
        return await post_keyed(send, self.slack, channel, thread_ts, metadata)

    async def update(
        self,
        channel: str,
        ts: str,
        text: str,
        *,
        carries: str,
        blocks: list[dict[str, Any]] | None = None,
        reader: str | None = None,
    ) -> AsyncSlackResponse:
        """An edit of the bot's message `ts` (all of its text and blocks)."""
        await self._allow(channel, carries, reader)
        if blocks is None:
            return await self.slack.chat_update(channel=channel, ts=ts, text=defuse(text))
        return await self.slack.chat_update(
            channel=channel, ts=ts, text=defuse(text), blocks=defuse_blocks(blocks)
        )

    async def ephemeral(
        self, channel: str, user: str, text: str, *, carries: str, thread_ts: str | None = None
    ) -> AsyncSlackResponse:
        """A message only `user` sees: checked against what that one person may read."""
        rest = audience.clauses(carries) - {audience.person(user)}
        if rest and not await self.reach.covers(audience.person(user), " ".join(sorted(rest))):
            raise self.refuse(f"{channel} (ephemeral for {user})", carries)
        return await self.slack.chat_postEphemeral(
            channel=channel, user=user, text=defuse(text), thread_ts=thread_ts
        )

    async def schedule(
        self,
        channel: str,
        text: str,
        post_at: int,
        *,
        carries: str,
        metadata: dict[str, Any] | None = None,
        approved: ApprovedWrite | None = None,
    ) -> AsyncSlackResponse:
        """A message Slack posts at `post_at` (epoch seconds)."""
        await self._allow(channel, carries, None, approved)
        return await self.slack.chat_scheduleMessage(
            channel=channel,
            text=defuse(text),
            post_at=post_at,
            metadata=metadata,
            unfurl_links=False,
            unfurl_media=False,
        )

    def reply(self, channel: str, thread_ts: str | None, reader: str | None = None) -> Outlet:
        """The destination of one live reply (`reader`: the person of a DM)."""
        return Outlet(self, channel, thread_ts, reader)


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

    async def post(self, text: str, *, carries: str) -> dict[str, Any]:
        """A message of the reply in its thread (a continuation, or its first post), posted
        once although Slack's answer may be lost (`post_keyed`)."""
        await self._allow(carries)
        once = single_attempt(self.poster.slack)
        return await post_keyed(
            lambda marked: once.chat_postMessage(
                channel=self.channel,
                thread_ts=self.thread_ts,
                text=defuse(text),
                metadata=marked,
                unfurl_links=False,  # Slack would fetch a model-written URL unclicked
                unfurl_media=False,
            ),
            self.poster.slack,
            self.channel,
            self.thread_ts,
        )

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


_POSTERS: weakref.WeakKeyDictionary[AsyncWebClient, Poster] = weakref.WeakKeyDictionary()


def poster_of(slack: AsyncWebClient) -> Poster:
    """The `Poster` of this Slack client (made on first use; it shares `reach_of(slack)`)."""
    found = _POSTERS.get(slack)
    if found is None:
        found = _POSTERS[slack] = Poster(slack)
    return found
