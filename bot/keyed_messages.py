"""Messages that carry an idempotency key in their Slack message metadata, and finding them
again. Neutral ground: the slack tool pack (a retried post) and the card publisher (a poster
taking over from one that died) both use it, so a write repeated after a crash finds the
message the first attempt posted instead of posting a second one.

The look-up reads every message from `oldest` on (the moment the write could first have
happened), page by page, so it finds the message however busy the channel or thread became
since; `MAX_PAGES` only bounds a runaway (a channel with a hundred thousand messages since)."""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

PAGE = 200  # Slack's advice for conversations.history/replies pages
MAX_PAGES = 500
CLOCK_SKEW_SECONDS = 60.0  # our clock and Slack's may differ by this much


def keyed(event_type: str, key: str) -> dict[str, Any]:
    """The `metadata` argument of `chat.postMessage` that marks a message with `key`."""
    return {"event_type": event_type, "event_payload": {"key": key}}


def slack_ts(moment: datetime) -> str:
    """A Slack timestamp a little before `moment` (allowing for clock skew), for `oldest`."""
    return f"{moment.timestamp() - CLOCK_SKEW_SECONDS:.6f}"


def single_attempt(client: AsyncWebClient) -> AsyncWebClient:
    """The same client without the retries that re-send a request whose answer was lost (a
    dropped connection, a 5xx): for writes, a second send may write twice. Waiting out a 429
    stays (Slack did nothing)."""
    handlers = getattr(client, "retry_handlers", None)
    if handlers is None:
        return client
    once = copy.copy(client)
    once.retry_handlers = [h for h in handlers if isinstance(h, AsyncRateLimitErrorRetryHandler)]
    return once


async def _messages(
    slack: AsyncWebClient, channel: str, thread_ts: str | None, oldest: str | None
) -> AsyncIterator[dict[str, Any]]:
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        args: dict[str, Any] = {
            "channel": channel,
            "limit": PAGE,
            "include_all_metadata": True,
            **({"oldest": oldest} if oldest else {}),
            **({"cursor": cursor} if cursor else {}),
        }
        if thread_ts:
            page = await slack.conversations_replies(ts=thread_ts, **args)
        else:
            page = await slack.conversations_history(**args)
        for message in page.get("messages") or []:
            yield message
        cursor = ((page.get("response_metadata") or {}).get("next_cursor")) or None
        if not cursor or not page.get("has_more", True):
            return


async def find_keyed(
    slack: AsyncWebClient,
    channel: str,
    event_type: str,
    key: str,
    *,
    thread_ts: str | None = None,
    oldest: str | None = None,
) -> str | None:
    """The ts of a message in the thread (or the channel) posted since `oldest` and marked
    with `key`, if any."""
    async for message in _messages(slack, channel, thread_ts, oldest):
        metadata = message.get("metadata") or {}
        payload = metadata.get("event_payload") or {}
        if metadata.get("event_type") == event_type and payload.get("key") == key:
            return str(message.get("ts"))
    return None


POST_ATTEMPTS = 3
MESSAGE_EVENT = "countersign_message"  # the metadata event type of an unkeyed post
POST_BACKOFF_SECONDS = 0.5


def _answer_lost(exc: Exception) -> bool:
    """Slack may have acted but its answer never arrived: a dropped connection, a time-out,
    or a 5xx (Slack's own retry advice). Any other refusal is an answer."""
    if isinstance(exc, SlackApiError):
        return int(getattr(exc.response, "status_code", 0) or 0) >= 500
    return isinstance(exc, aiohttp.ClientError | TimeoutError | ConnectionError)


async def post_keyed(
    send: Callable[[dict[str, Any] | None], Awaitable[AsyncSlackResponse]],
    slack: AsyncWebClient,
    channel: str,
    thread_ts: str | None,
    metadata: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Post at most once although Slack's answer may be lost on the way: `send(metadata)`
    makes one attempt (through a `single_attempt` client) marked with `metadata`'s key, or a
    fresh one; after a lost answer, the thread is read for that key before trying again.
    slack_sdk's retry handlers would re-send at once, and Slack would carry the message out
    twice (a second "Thinking…" that nothing ever edits, a second card nobody updates).

    Returns Slack's answer, or `{"ok": True, "ts": …}` of the message found again."""
    if metadata is None:
        metadata = keyed(MESSAGE_EVENT, uuid.uuid4().hex)
    payload = metadata.get("event_payload")
    if not isinstance(payload, dict) or not payload.get("key"):
        # Metadata of its own (an audit checkpoint's rows) is kept as it is: posted once,
        # with nothing to find it again by.
        answer = await send(metadata)
        return dict(answer.data) if isinstance(answer.data, dict) else {"ok": True}
    event_type, key = str(metadata["event_type"]), str(metadata["event_payload"]["key"])
    since = slack_ts(datetime.now(UTC))
    lost: Exception | None = None
    for attempt in range(POST_ATTEMPTS):
        if attempt:
            await asyncio.sleep(POST_BACKOFF_SECONDS * attempt)
        try:
            answer = await send(metadata)
            return dict(answer.data) if isinstance(answer.data, dict) else {"ok": True}
        except Exception as exc:
            if not _answer_lost(exc):
                raise
            lost = exc
        try:
            found = await find_keyed(
                slack, channel, event_type, key, thread_ts=thread_ts, oldest=since
            )
        except (SlackApiError, aiohttp.ClientError, TimeoutError):
            found = None  # cannot tell now: try again (a later look finds the key)
        if found is not None:
            return {"ok": True, "ts": found, "channel": channel}
    assert lost is not None
    raise lost
