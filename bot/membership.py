"""Channel membership, asked of Slack's Web API. Neutral ground: the tools (acting for a
requester) and the Slack surface (/history) both decide reach with it."""

from __future__ import annotations

from slack_sdk.web.async_client import AsyncWebClient

MEMBER_PAGES = 20  # 20,000 members at most are looked through


async def is_member(slack: AsyncWebClient, channel: str, user: str) -> bool:
    cursor: str | None = None
    for _ in range(MEMBER_PAGES):
        page = await slack.conversations_members(channel=channel, limit=1000, cursor=cursor)
        if user in (page.get("members") or []):
            return True
        cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
        if not cursor:
            return False
    return False


def is_private(info: dict[str, object]) -> bool:
    """Private channels, group DMs and DMs: readable by their members only."""
    return bool(info.get("is_private") or info.get("is_mpim") or info.get("is_im"))
