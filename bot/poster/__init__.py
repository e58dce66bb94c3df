"""The one way the bot posts to Slack: every message about a turn or a proposal (replies and
their edits and streams, cards, notes, reminders, escalation notices, private words, approved
writes) goes through `Poster` (a live reply through its `Outlet`, `bot.poster.outlet`), and no
other module calls Slack's post, update, ephemeral, schedule or streaming methods
(tests/test_one_poster.py reads the source to hold it).

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

import logging
import weakref
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot import audience
from bot.keyed_messages import post_keyed, single_attempt
from bot.membership import Reach, reach_of
from bot.poster.checks import NOTHING_PRIVATE, ApprovedWrite, PostRefused
from bot.poster.outlet import Outlet
from bot.text import defuse, defuse_blocks

log = logging.getLogger(__name__)

__all__ = ["NOTHING_PRIVATE", "ApprovedWrite", "Outlet", "PostRefused", "Poster", "poster_of"]


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
        if approved is not None:  # already one attempt: its executor's `single_attempt` client
            answer = await self.slack.chat_postMessage(
                **_message(channel, thread_ts, text, blocks), metadata=metadata
            )
            return dict(answer.data) if isinstance(answer.data, dict) else {"ok": True}
        return await self.post_once(channel, text, thread_ts, blocks, metadata)

    async def post_once(
        self,
        channel: str,
        text: str,
        thread_ts: str | None,
        blocks: list[dict[str, Any]] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Post, checked already, one attempt at a time under a key (`post_keyed`)."""
        once = single_attempt(self.slack)
        return await post_keyed(
            lambda marked: once.chat_postMessage(
                **_message(channel, thread_ts, text, blocks), metadata=marked
            ),
            self.slack,
            channel,
            thread_ts,
            metadata,
        )

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


def _message(
    channel: str, thread_ts: str | None, text: str, blocks: list[dict[str, Any]] | None
) -> dict[str, Any]:
    """A new message's arguments: link previews off (Slack must not fetch what the bot
    shows, a model-written URL included), broadcast pings defused."""
    return {
        "channel": channel,
        "thread_ts": thread_ts,
        "text": defuse(text),
        "blocks": defuse_blocks(blocks) if blocks is not None else None,
        "unfurl_links": False,
        "unfurl_media": False,
    }


_POSTERS: weakref.WeakKeyDictionary[AsyncWebClient, Poster] = weakref.WeakKeyDictionary()


def poster_of(slack: AsyncWebClient) -> Poster:
    """The `Poster` of this Slack client (made on first use; it shares `reach_of(slack)`)."""
    found = _POSTERS.get(slack)
    if found is None:
        found = _POSTERS[slack] = Poster(slack)
    return found
