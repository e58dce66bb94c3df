"""A user's Slack message, parsed once from the event payload into what a turn needs."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from bot.slack.render import unescape

DM_TIMELINE = ""  # thread key of a DM's main timeline


@dataclass(frozen=True)
class Incoming:
    team_id: str
    channel_id: str
    user_id: str
    text: str
    ts: str
    thread_ts: str | None
    event_id: str | None
    is_dm: bool
    mentions_bot: bool
    # It mentions a person, a user group or the channel (`<!here>`…) and not the bot: it is
    # addressed to them, so a thread the bot is in keeps it as context and does not answer.
    addresses_others: bool = False
    # Slack's `files` of the message: a `message` event and an `app_mention` list them alike
    # (payloads captured from Slack, typed by Slack's own SDKs: `files`, `upload`). They are
    # never read again from Slack: that read was one more call before every model request,
    # on `conversations.history` (Tier 3) or `conversations.replies` (Tier 1 for some apps),
    # skipped anyway once its budget was spent, so 60 mentions at once lost files with it.
    files: tuple[dict[str, Any], ...] = field(default=(), compare=False, hash=False)

    @property
    def conversation_key(self) -> str:
        """Which conversation the message belongs to: its thread, or a DM's main timeline."""
        if self.thread_ts:
            return self.thread_ts
        return DM_TIMELINE if self.is_dm else self.ts

    @property
    def reply_thread_ts(self) -> str | None:
        """Where the bot answers: in the thread; unthreaded in a DM's main timeline."""
        key = self.conversation_key
        return key or None

    @property
    def joins_existing_thread(self) -> bool:
        return bool(self.thread_ts) and self.thread_ts != self.ts

    def delivery_keys(self) -> list[str]:
        """Dedup keys: Slack's event id, and channel+ts, which `app_mention` and
        `message.channels` deliveries of one message share."""
        keys = [f"msg:{self.team_id}:{self.channel_id}:{self.ts}"]
        if self.event_id:
            keys.append(f"evt:{self.event_id}")
        return keys


def strip_mention(text: str, bot_user_id: str | None) -> str:
    if bot_user_id:
        text = re.sub(rf"<@{re.escape(bot_user_id)}(\|[^>]*)?>", "", text)
    return unescape(text).strip()


# How Slack writes a mention of people in a message's text: a user (`<@U…>`, `<@W…>` on
# Enterprise Grid, with an optional `|label`), a user group (`<!subteam^S…>`), or the channel
# (`<!here>`, `<!channel>`, `<!everyone>`). Text the person typed as `<@U1>` arrives escaped
# (`&lt;@U1&gt;`) and is not a mention.
PEOPLE_MENTION = re.compile(
    r"<(?:@([A-Z0-9]+)|!subteam\^[A-Z0-9]+|!here|!channel|!everyone)(?:\|[^>]*)?>"
)


def mentions_others(raw: str, bot_user_id: str | None) -> bool:
    """Whether raw event text mentions anyone but the bot (a person, a group, the channel)."""
    return any(
        m.group(1) is None or m.group(1) != bot_user_id for m in PEOPLE_MENTION.finditer(raw)
    )


SLACK_ID = re.compile(r"[A-Z0-9][A-Z0-9_-]{0,31}")
# Slackbot: a bot Slack does not mark as one (no `bot_id`, `is_bot` false; reminders and
# notices often without a subtype). Answering it could start an exchange of bots.
SLACKBOT = "USLACKBOT"
SLACK_TS = re.compile(r"\d{1,12}\.\d{1,9}")


def _well_formed(value: object, pattern: re.Pattern[str]) -> str | None:
    """`value` if it is a string in Slack's shape for it, else None: junk never reaches a turn
    (a dict where a ts belongs once started a reply in the channel)."""
    return value if isinstance(value, str) and pattern.fullmatch(value) else None


def parse_event(body: dict[str, Any], bot_user_id: str | None) -> Incoming | None:
    """The Incoming message of an `app_mention` or `message` event, or None to ignore it
    (including anything not in the shape Slack sends)."""
    event = body.get("event")
    if not isinstance(event, dict):
        return None
    subtype = event.get("subtype")
    if subtype not in (None, "file_share", "thread_broadcast"):
        return None  # edits, deletions, joins, bot messages…
    user = _well_formed(event.get("user"), SLACK_ID)
    if user is None or event.get("bot_id") or user in (bot_user_id, SLACKBOT):
        return None
    channel = _well_formed(event.get("channel"), SLACK_ID)
    ts = _well_formed(event.get("ts"), SLACK_TS)
    team = _well_formed(body.get("team_id") or event.get("team"), SLACK_ID)
    raw_thread = event.get("thread_ts")
    thread_ts = _well_formed(raw_thread, SLACK_TS)
    raw = event.get("text")
    if channel is None or ts is None or team is None or not isinstance(raw, str | None):
        return None
    if raw_thread is not None and thread_ts is None:
        return None
    raw = raw or ""
    mentions = event.get("type") == "app_mention" or (
        bool(bot_user_id) and f"<@{bot_user_id}" in raw
    )
    channel_type = event.get("channel_type")
    event_id = body.get("event_id")
    files = event.get("files")
    return Incoming(
        team_id=team,
        channel_id=channel,
        user_id=user,
        text=strip_mention(raw, bot_user_id),
        ts=ts,
        thread_ts=thread_ts,
        event_id=event_id if isinstance(event_id, str) else None,
        is_dm=channel_type == "im" or (channel_type is None and channel.startswith("D")),
        mentions_bot=mentions,
        addresses_others=not mentions and mentions_others(raw, bot_user_id),
        files=tuple(f for f in files if isinstance(f, dict)) if isinstance(files, list) else (),
    )
