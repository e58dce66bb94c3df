"""`slack`: read and act in the workspace through the Web API.

Text the model wants to post is escaped like every model text (`&`, `<`, `>`), so an approved
message can never ping `@channel` or a user by smuggling mention syntax.

Reach: the bot sees every channel it was invited to, but each tool acts for the person who asked.
Reading a private channel (or a DM) needs the requester to be a member of it; every write needs
the requester to be a member of the target channel, checked when the card is prepared and
again just before the write runs. A message post (or a scheduled one) carries the proposal's
idempotency key in its message metadata, so a retry finds the earlier post instead of posting
twice: in the channel's history since the approval, however busy it became, and for a message
still waiting to be posted, among the channel's scheduled messages (same time, same text).
"""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field, field_validator

from bot.audience import channel as channel_audience
from bot.keyed_messages import MAX_PAGES, find_keyed, keyed, slack_ts
from bot.membership import is_member, reach_of
from bot.text import escape
from bot.tools.registry import (
    Change,
    Outcome,
    Preview,
    ToolContext,
    ToolError,
    read_tool,
    write_tool,
)
from bot.tools.shown_notes import Mentions

PACK = "slack"

CHANNEL = Field(
    pattern=r"^[CG][A-Z0-9]{2,}$", max_length=32, description="channel id, e.g. C012ABC"
)
# Slack's limits at the destination: chat.postMessage answers msg_too_long for text much over
# 4,000 characters (and truncates past 40,000), counted after our escaping of &, <, >;
# conversations.setTopic takes 250 characters.
MESSAGE_MAX = 4000
TOPIC_MAX = 250


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class ChannelInfo(_Args):
    channel: str = CHANNEL


class RecentMessages(_Args):
    channel: str = CHANNEL
    limit: int = Field(20, ge=1, le=100)


class LookupUser(_Args):
    user: str | None = Field(None, pattern=r"^[UW][A-Z0-9]{2,}$", description="user id")
    email: str | None = Field(None, max_length=200, description="or the user's email")


def _postable(text: str) -> str:
    sent = len(escape(text))
    if sent > MESSAGE_MAX:
        raise ValueError(
            f"the message is {sent} characters as sent (& < > count as &amp; &lt; &gt;); "
            f"Slack takes at most {MESSAGE_MAX}: shorten it or split it"
        )
    return text


class PostMessage(_Args):
    channel: str = CHANNEL
    text: str = Field(min_length=1, max_length=MESSAGE_MAX)

    _fits = field_validator("text")(_postable)


class ScheduleMessage(_Args):
    channel: str = CHANNEL
    text: str = Field(min_length=1, max_length=MESSAGE_MAX)
    post_at: datetime = Field(description="when to post, ISO 8601 with a time zone")

    _fits = field_validator("text")(_postable)


class SetChannelTopic(_Args):
    channel: str = CHANNEL
    topic: str = Field(max_length=TOPIC_MAX)


async def _channel(ctx: ToolContext, channel: str) -> dict[str, object]:
    info = await ctx.slack.conversations_info(channel=channel)
    data = info.get("channel") or {}
    return dict(data)


IDEMPOTENCY_EVENT = "countersign_action"


async def _reach(ctx: ToolContext, channel: str, *, write: bool) -> dict[str, object]:
    """The channel's info if the requester may read it (writes: act in it); else ToolError.
    Reading a public channel one has not joined is for the workspace's full members only."""
    data = await _channel(ctx, channel)
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


def _topic(channel: dict[str, object]) -> str:
    topic = channel.get("topic")
    return str(topic.get("value", "")) if isinstance(topic, dict) else ""


@read_tool(
    "get_channel_info",
    "Name, topic and purpose of a channel.",
    ChannelInfo,
    label="Looking at the channel",
)
async def get_channel_info(args: ChannelInfo, ctx: ToolContext) -> Outcome:
    data = await _reach(ctx, args.channel, write=False)
    purpose = data.get("purpose")
    result = {
        "id": data.get("id"),
        "name": data.get("name"),
        "topic": _topic(data),
        "purpose": purpose.get("value") if isinstance(purpose, dict) else None,
        "members": data.get("num_members"),
        "is_private": data.get("is_private"),
    }
    return Outcome(
        result,
        f"#{data.get('name')}",
        audience=channel_audience(args.channel),
        source=f"#{data.get('name')} (its topic and purpose)",
    )


@read_tool(
    "get_recent_messages",
    "Recent messages of a channel (private ones only for their members).",
    RecentMessages,
    label="Reading recent messages",
)
async def get_recent_messages(args: RecentMessages, ctx: ToolContext) -> Outcome:
    data = await _reach(ctx, args.channel, write=False)
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
        source=f"messages of {_label(data, args.channel)}"
        + (f" by {', '.join(names)}{more}" if names else ""),
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


def _label(info: dict[str, object], channel: str) -> str:
    return f"#{info.get('name') or channel}"


async def _preview_post(args: PostMessage, ctx: ToolContext) -> Preview:
    where = _label(await _reach(ctx, args.channel, write=True), args.channel)
    return Preview(f"Post a message in {where}", (Change("message", None, args.text),))


@write_tool(
    "post_message",
    "Post a message in a channel (a person must approve it first).",
    PostMessage,
    preview=_preview_post,
    mentions=Mentions.SLACK_ESCAPED,
    finds_earlier_write=True,
)
async def post_message(args: PostMessage, ctx: ToolContext) -> Outcome:
    await _reach(ctx, args.channel, write=True)
    key = ctx.idempotency_key
    ts = await _posted_earlier(ctx, args.channel, key) if key else None
    if ts is None:
        metadata = keyed(IDEMPOTENCY_EVENT, key) if key else None
        posted = await ctx.slack.chat_postMessage(
            channel=args.channel,
            text=escape(args.text),
            metadata=metadata,
            unfurl_links=False,  # the card showed the text, not what Slack would fetch
            unfurl_media=False,
        )
        ts = str(posted["ts"])
    link = await _permalink(ctx, args.channel, ts)
    return Outcome({"posted": True, "channel": args.channel, "ts": ts}, "Message posted", link)


async def _posted_earlier(ctx: ToolContext, channel: str, key: str) -> str | None:
    """The ts of the message an earlier attempt of this action posted, if any."""
    oldest = slack_ts(ctx.since) if ctx.since else None
    return await find_keyed(ctx.slack, channel, IDEMPOTENCY_EVENT, key, oldest=oldest)


async def _scheduled_earlier(ctx: ToolContext, channel: str, text: str, post_at: int) -> str | None:
    """The id of a message still waiting to be posted in `channel` at `post_at` with exactly
    `text` (Slack's list carries no metadata: the same time and text in the same channel is
    the same write)."""
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await ctx.slack.chat_scheduledMessages_list(
            channel=channel, cursor=cursor, limit=100
        )
        for message in page.get("scheduled_messages") or []:
            if int(message.get("post_at") or 0) == post_at and message.get("text") == text:
                return str(message.get("id"))
        cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
        if not cursor:
            return None
    return None


async def _permalink(ctx: ToolContext, channel: str, ts: str) -> str | None:
    try:
        found = await ctx.slack.chat_getPermalink(channel=channel, message_ts=ts)
    except Exception:  # a missing link must not turn a done write into a failure
        return None
    return str(found.get("permalink")) if found.get("permalink") else None


async def _preview_schedule(args: ScheduleMessage, ctx: ToolContext) -> Preview:
    where = _label(await _reach(ctx, args.channel, write=True), args.channel)
    when = args.post_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return Preview(
        f"Schedule a message in {where} for {when}",
        (Change("message", None, args.text), Change("post at", None, when)),
    )


@write_tool(
    "schedule_message",
    "Schedule a message for later in a channel (a person must approve it first).",
    ScheduleMessage,
    preview=_preview_schedule,
    mentions=Mentions.SLACK_ESCAPED,
    finds_earlier_write=True,
)
async def schedule_message(args: ScheduleMessage, ctx: ToolContext) -> Outcome:
    await _reach(ctx, args.channel, write=True)
    post_at, text, key = int(args.post_at.timestamp()), escape(args.text), ctx.idempotency_key
    if key:  # an earlier attempt's message: still waiting, or posted already
        waiting = await _scheduled_earlier(ctx, args.channel, text, post_at)
        if waiting is not None:
            return _scheduled(waiting)
        posted = await _posted_earlier(ctx, args.channel, key)
        if posted is not None:
            link = await _permalink(ctx, args.channel, posted)
            return Outcome(
                {"scheduled": True, "posted": True, "ts": posted}, "Message posted", link
            )
    if post_at <= int(datetime.now(UTC).timestamp()):
        raise ValueError("post_at is in the past")
    done = await ctx.slack.chat_scheduleMessage(
        channel=args.channel,
        text=text,
        post_at=post_at,
        metadata=keyed(IDEMPOTENCY_EVENT, key) if key else None,
        unfurl_links=False,
        unfurl_media=False,
    )
    return _scheduled(done.get("scheduled_message_id"))


def _scheduled(message_id: object) -> Outcome:
    return Outcome({"scheduled": True, "scheduled_message_id": message_id}, "Message scheduled")


async def _preview_topic(args: SetChannelTopic, ctx: ToolContext) -> Preview:
    data = await _reach(ctx, args.channel, write=True)
    return Preview(
        f"Set the topic of {_label(data, args.channel)}",
        (Change("topic", _topic(data) or None, args.topic or None),),
    )


@write_tool(
    "set_channel_topic",
    "Change a channel's topic (a person must approve it first).",
    SetChannelTopic,
    preview=_preview_topic,
    destructive=True,
    mentions=Mentions.SLACK,
)
async def set_channel_topic(args: SetChannelTopic, ctx: ToolContext) -> Outcome:
    await _reach(ctx, args.channel, write=True)
    await ctx.slack.conversations_setTopic(channel=args.channel, topic=args.topic)
    return Outcome({"topic": args.topic}, "Topic set")


TOOLS = [
    get_channel_info,
    get_recent_messages,
    lookup_user,
    post_message,
    schedule_message,
    set_channel_topic,
]
