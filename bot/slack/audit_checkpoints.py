"""The audit chain's checkpoints in Slack: posted to `AUDIT_CHECKPOINT_CHANNEL` (text for
people, message metadata for `audit verify`) and read back with `conversations.history`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.poster import NOTHING_PRIVATE, poster_of
from bot.records.audit_checkpoints import EVENT_TYPE, Checkpoint, Post


def poster(client: AsyncWebClient, channel: str) -> Post:
    async def post(checkpoint: Checkpoint) -> None:
        signed = f"signature `{checkpoint.signature}`" if checkpoint.signature else "*unsigned*"
        await poster_of(client).post(
            channel,
            f"Audit checkpoint of workspace {checkpoint.team_id}: {checkpoint.rows} rows, "
            f"head `{checkpoint.head_hash}`, {signed}",
            carries=NOTHING_PRIVATE,  # counts and hashes, no content
            metadata={"event_type": EVENT_TYPE, "event_payload": checkpoint.payload()},
        )

    return post


def _parse(channel: str, message: dict[str, Any]) -> Checkpoint | None:
    metadata = message.get("metadata") or {}
    if metadata.get("event_type") != EVENT_TYPE:
        return None
    payload = metadata.get("event_payload") or {}
    try:
        at = datetime.strptime(str(payload["at"]), "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
        return Checkpoint(
            str(payload["team"]),
            int(payload["rows"]),
            str(payload["head"]),
            at,
            str(payload.get("signature") or "") or None,
            f"Slack {channel} {message.get('ts')}",
        )
    except (KeyError, TypeError, ValueError):
        return None


async def posted_checkpoints(client: AsyncWebClient, channel: str) -> list[Checkpoint]:
    """Every checkpoint posted to `channel` (raises `SlackApiError` if it cannot be read)."""
    found: list[Checkpoint] = []
    cursor: str | None = None
    while True:
        page = await client.conversations_history(
            channel=channel, include_all_metadata=True, limit=200, cursor=cursor
        )
        for message in page.get("messages") or []:
            if (checkpoint := _parse(channel, message)) is not None:
                found.append(checkpoint)
        cursor = ((page.get("response_metadata") or {}).get("next_cursor")) or None
        if not cursor:
            return found
