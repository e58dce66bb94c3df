"""Messages that carry an idempotency key in their Slack message metadata, and finding them
again. Neutral ground: the slack tool pack (a retried post) and the card publisher (a poster
taking over from one that died) both use it, so a write repeated after a crash finds the
message the first attempt posted instead of posting a second one."""

from __future__ import annotations

from typing import Any

from slack_sdk.web.async_client import AsyncWebClient


def keyed(event_type: str, key: str) -> dict[str, Any]:
    """The `metadata` argument of `chat.postMessage` that marks a message with `key`."""
    return {"event_type": event_type, "event_payload": {"key": key}}


async def find_keyed(
    slack: AsyncWebClient,
    channel: str,
    event_type: str,
    key: str,
    *,
    thread_ts: str | None = None,
    oldest: str | None = None,
) -> str | None:
    """The ts of the newest message in the thread (or the channel's recent history) marked
    with `key`, if any."""
    if thread_ts:
        found = await slack.conversations_replies(
            channel=channel, ts=thread_ts, limit=200, include_all_metadata=True
        )
    else:
        found = await slack.conversations_history(
            channel=channel, limit=100, oldest=oldest, include_all_metadata=True
        )
    for message in found.get("messages") or []:
        metadata = message.get("metadata") or {}
        payload = metadata.get("event_payload") or {}
        if metadata.get("event_type") == event_type and payload.get("key") == key:
            return str(message.get("ts"))
    return None
