"""What a person can read in Slack right now, asked of Slack (briefly cached).

A DM with the bot is its one human's; a public channel is readable by the workspace; a private
channel (or a group DM) only by its current members, so someone who left it no longer sees
what the bot kept of it. When Slack cannot answer, the answer is no.
"""

from __future__ import annotations

import logging
import time

from slack_sdk.web.async_client import AsyncWebClient

from bot.membership import is_member, is_private

log = logging.getLogger(__name__)

TTL_SECONDS = 60.0


class ChannelAccess:
    def __init__(self, slack: AsyncWebClient) -> None:
        self.slack = slack
        self._cache: dict[tuple[str, str], tuple[float, bool]] = {}

    async def can_read(self, channel: str, user: str) -> bool:
        if channel.startswith("D"):
            return True  # a DM conversation: participants were checked already
        cached = self._cache.get((channel, user))
        if cached and time.monotonic() - cached[0] < TTL_SECONDS:
            return cached[1]
        try:
            allowed = await self._ask(channel, user)
        except Exception as exc:  # no answer, no access
            log.warning("could not check access to %s: %s", channel, type(exc).__name__)
            return False
        self._cache[(channel, user)] = (time.monotonic(), allowed)
        if len(self._cache) > 10_000:
            self._cache.clear()
        return allowed

    async def _ask(self, channel: str, user: str) -> bool:
        info = (await self.slack.conversations_info(channel=channel)).get("channel") or {}
        return not is_private(info) or await is_member(self.slack, channel, user)
