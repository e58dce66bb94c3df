"""The `slack` pack's writes: each is a card first, and a retry finds the earlier write by the
proposal's idempotency key (see the package's docstring)."""

from __future__ import annotations

from datetime import UTC, datetime

from bot.keyed_messages import MAX_PAGES, find_keyed, keyed, slack_ts
from bot.text import escape
from bot.tools.packs.slack.arguments import PostMessage, ScheduleMessage, SetChannelTopic
from bot.tools.packs.slack.reach import IDEMPOTENCY_EVENT, label, reach, topic_of
from bot.tools.registry import Change, Outcome, Preview, ToolContext, write_tool
from bot.tools.shown_notes import Mentions


async def _preview_post(args: PostMessage, ctx: ToolContext) -> Preview:
    where = label(await reach(ctx, args.channel, write=True), args.channel)
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
    await reach(ctx, args.channel, write=True)
    key = ctx.idempotency_key
    ts = await _posted_earlier(ctx, args.channel, key) if key else None
    if ts is None:
        metadata = keyed(IDEMPOTENCY_EVENT, key) if key else None
        posted = await ctx.poster.post(
            args.channel,
            escape(args.text),
            carries=ctx.carries,  # may be wider there: a person approved this text for it
            metadata=metadata,
            approved=ctx.approved_write(),
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
    where = label(await reach(ctx, args.channel, write=True), args.channel)
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
    await reach(ctx, args.channel, write=True)
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
    done = await ctx.poster.schedule(
        args.channel,
        text,
        post_at,
        carries=ctx.carries,
        metadata=keyed(IDEMPOTENCY_EVENT, key) if key else None,
        approved=ctx.approved_write(),
    )
    return _scheduled(done.get("scheduled_message_id"))


def _scheduled(message_id: object) -> Outcome:
    return Outcome({"scheduled": True, "scheduled_message_id": message_id}, "Message scheduled")


async def _preview_topic(args: SetChannelTopic, ctx: ToolContext) -> Preview:
    data = await reach(ctx, args.channel, write=True)
    return Preview(
        f"Set the topic of {label(data, args.channel)}",
        (Change("topic", topic_of(data) or None, args.topic or None),),
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
    await reach(ctx, args.channel, write=True)
    await ctx.slack.conversations_setTopic(channel=args.channel, topic=args.topic)
    return Outcome({"topic": args.topic}, "Topic set")
