"""What a person can read in Slack right now, asked of Slack (briefly cached).

A DM with the bot is its one human's; a public channel is readable by the workspace's full
members (guests and other teams' people only where they are members); a private channel (or a
group DM) only by its current members, so someone who left it no longer sees what the bot kept
of it. When Slack cannot answer, the answer is no. The rules live in `bot.membership.Reach`.
"""

from __future__ import annotations

from slack_sdk.web.async_client import AsyncWebClient

from bot.membership import Reach, reach_of


class ChannelAccess:
    def __init__(self, slack: AsyncWebClient) -> None:
        self.slack = slack
        self.reach: Reach = reach_of(slack)

    async def can_read(self, channel: str, user: str) -> bool:
        if channel.startswith("D"):
            return True  # a DM conversation: participants were checked already
        return await self.reach.can_read(channel, user)

    async def may_read(self, user: str, audience: str | None) -> bool:
        """Whether `user` may read data of `audience` (see `bot.audience`)."""
        return await self.reach.may_read(user, audience)
