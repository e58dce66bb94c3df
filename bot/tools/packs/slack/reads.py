"""The `slack` pack's reads: they run at once, for channels the person who asked may read."""

from __future__ import annotations

from bot.audience import channel as channel_audience
from bot.provenance import Source
from bot.tools.packs.slack.arguments import ChannelInfo, LookupUser, RecentMessages
from bot.tools.packs.slack.reach import label, reach, topic_of
from bot.tools.registry import Outcome, ToolContext, read_tool


@read_tool(
    "get_channel_info",
    "Name, topic and purpose of a channel.",
    ChannelInfo,
    label="Looking at the channel",
)
async def get_channel_info(args: ChannelInfo, ctx: ToolContext) -> Outcome:
    data = await reach(ctx, args.channel, write=False)
    purpose = data.get("purpose")
    result = {
        "id": data.get("id"),
        "name": data.get("name"),
        "topic": topic_of(data),
        "purpose": purpose.get("value") if isinstance(purpose, dict) else None,
        "members": data.get("num_members"),
        "is_private": data.get("is_private"),
    }
    return Outcome(
        result,
        f"#{data.get('name')}",
        audience=channel_audience(args.channel),
        source=Source("tool", f"#{data.get('name')} (its topic and purpose)"),
    )


@read_tool(
    "get_recent_messages",
    "Recent messages of a channel (private ones only for their members).",
    RecentMessages,
    label="Reading recent messages",
)
async def get_recent_messages(args: RecentMessages, ctx: ToolContext) -> Outcome:
    data = await reach(ctx, args.channel, write=False)
    history = await ctx.slack.conversations_history(channel=args.channel, limit=args.limit)
    messages = [
        {"user": m.get("user") or m.get("bot_id"), "ts": m.get("ts"), "text": m.get("text", "")}
        for m in history.get("messages") or []
    ]
    authors = sorted({str(m["user"]) for m in messages if m["user"]})
    names = [await ctx.user_label(a) for a in authors[:5]]
    more = f" and {len(authors) - 5} more" if len(authors) > 5 else ""
    return Outcome(
        {"messages": messages},
        f"{len(messages)} message(s)",
        audience=channel_audience(args.channel),
        source=Source(
            "tool",
            f"messages of {label(data, args.channel)}"
            + (f" by {', '.join(names)}{more}" if names else ""),
        ),
    )


@read_tool(
    "lookup_user",
    "Find a workspace member by id or email.",
    LookupUser,
    label="Looking up a person",
)
async def lookup_user(args: LookupUser, ctx: ToolContext) -> Outcome:
    if args.user:
        found = await ctx.slack.users_info(user=args.user)
    elif args.email:
        found = await ctx.slack.users_lookupByEmail(email=args.email)
    else:
        raise ValueError("give either user or email")
    user = found.get("user") or {}
    profile = user.get("profile") or {}
    result = {
        "id": user.get("id"),
        "name": user.get("name"),
        "real_name": user.get("real_name"),
        "display_name": profile.get("display_name"),
        "title": profile.get("title"),
        "tz": user.get("tz"),
        "is_bot": user.get("is_bot"),
    }
    return Outcome(result, str(result["real_name"] or result["name"]))
