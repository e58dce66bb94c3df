"""A person's message, typed or with a shared file, turned into what Slack stores and sends
the app: the message in its channel or thread, and the event (`app_mention` for a mention in
a channel, else `message`). As in Slack, a message with files carries them (`files`,
`upload`, and `subtype: file_share` when there is no text), an `app_mention` as well as a
`message` (as payloads captured from Slack show)."""

from __future__ import annotations

import re
from typing import Any

from sandbox import files
from sandbox.socket_mode import SocketHub
from sandbox.workspace import BOT_USER_ID, TEAM_ID, Message, Workspace

MENTION = re.compile(r"^\s*@countersign\b", re.IGNORECASE)


def post(
    ws: Workspace,
    hub: SocketHub,
    user: str,
    channel_id: str,
    text: str,
    thread_ts: str | None,
    shared: dict[str, Any] | None = None,
) -> str:
    """Store the message (and its file) and queue its event for the app; returns its ts.
    Raises files.BadFile for a file the sandbox cannot take (nothing is stored then)."""
    channel = ws.channels[channel_id]
    mention = bool(MENTION.match(text)) and not channel.is_im
    if mention:
        text = MENTION.sub(f"<@{BOT_USER_ID}>", text, count=1)
    ts = ws.next_ts()
    message = Message(ts, text, user, thread_ts)
    if shared is not None:
        found = files.share(ws, user, channel_id, ts, thread_ts, shared)
        message.files = [found.slack(ws.base, public=not channel.private)]
        message.subtype = None if text else "file_share"
    ws.add(message, channel_id)
    event: dict[str, Any] = {
        "type": "app_mention" if mention else "message",
        "user": user,
        "text": text,
        "ts": ts,
        "channel": channel_id,
        "event_ts": ts,
        "team": TEAM_ID,
        "channel_type": "im" if channel.is_im else ("group" if channel.private else "channel"),
    }
    if thread_ts:
        event["thread_ts"] = thread_ts
    if message.files:
        event |= {"files": message.files, "upload": False, "display_as_bot": False}
        if message.subtype and not mention:
            event["subtype"] = message.subtype
    hub.event(event)
    return ts
