"""Who may reach a channel through the `slack` pack: the person who asked, not the bot."""

from __future__ import annotations

from bot.membership import is_member, reach_of
from bot.tools.registry import ToolContext, ToolError


async def channel_info(ctx: ToolContext, channel: str) -> dict[str, object]:
    info = await ctx.slack.conversations_info(channel=channel)
    data = info.get("channel") or {}
    return dict(data)


IDEMPOTENCY_EVENT = "countersign_action"


async def reach(ctx: ToolContext, channel: str, *, write: bool) -> dict[str, object]:
    """The channel's info if the requester may read it (writes: act in it); else ToolError.
    Reading a public channel one has not joined is for the workspace's full members only."""
    data = await channel_info(ctx, channel)
    if write:
        allowed = await is_member(ctx.slack, channel, ctx.requester)
    else:
        allowed = await reach_of(ctx.slack).can_read(channel, ctx.requester)
    if not allowed:
        raise ToolError(
            "the person who asked is not a member of that channel, so I cannot "
            + ("act in it for them" if write else "read it for them")
        )
    return data


def topic_of(channel: dict[str, object]) -> str:
    topic = channel.get("topic")
    return str(topic.get("value", "")) if isinstance(topic, dict) else ""


def label(info: dict[str, object], channel: str) -> str:
    return f"#{info.get('name') or channel}"
