"""The fake Slack's AI-app surfaces: native streaming and agent sessions, with their rules.

Rules, as Slack's docs and probes of the real service report them (see ../shared/SLACK-FACTS.md):

* `chat.startStream` needs `channel` and `thread_ts` (a streamed message is always a reply) and,
  for a bot token, both `recipient_user_id` and `recipient_team_id`;
* `markdown_text` (or a `markdown_text` chunk) is at most 12,000 characters per call
  (`msg_too_long` is per call, not cumulative);
* leading whitespace of an appended piece is lost where it joins the text so far (so a sender
  must not cut text before a space);
* a stream lives `stream_lifetime` seconds (about five minutes in Slack) from its start; after
  that, or after `chat.stopStream`, appends and stops answer `message_not_in_streaming_state`,
  and only `chat.update` changes the message;
* a message that is still streaming cannot be changed with `chat.update`
  (`streaming_state_conflict`);
* `task_update` chunks: `title` and `status` replace, `details` appends;
* `agents.sessions.setStatus` takes one of `active|processing|suspended|closed`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

MARKDOWN_MAX = 12_000
SESSION_STATUSES = {"active", "processing", "suspended", "closed"}
TASK_STATUSES = {"pending", "in_progress", "complete", "error"}


@dataclass
class StreamState:
    started_at: float
    open: bool = True
    recipient: tuple[str, str] = ("", "")
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    appends: int = 0


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def pieces(args: dict[str, Any]) -> tuple[str, list[dict[str, Any]]] | str:
    """The markdown and the other chunks of a streaming call, or the error Slack answers."""
    text = str(args.get("markdown_text") or "")
    if len(text) > MARKDOWN_MAX:
        return "msg_too_long"
    others: list[dict[str, Any]] = []
    chunks = _json(args.get("chunks")) or []
    if not isinstance(chunks, list):
        return "invalid_chunks"
    for chunk in chunks:
        if not isinstance(chunk, dict):
            return "invalid_chunks"
        kind = chunk.get("type")
        if kind == "markdown_text":
            piece = str(chunk.get("text") or "")
            if len(piece) > MARKDOWN_MAX:
                return "msg_too_long"
            text += piece
        elif kind == "task_update":
            if not chunk.get("id") or not chunk.get("title"):
                return "invalid_chunks"
            if chunk.get("status") not in TASK_STATUSES:
                return "invalid_chunks"
            others.append(chunk)
        elif kind in ("plan_update", "blocks"):
            others.append(chunk)
        else:
            return "invalid_chunks"
    return text, others


def join(shown: str, piece: str) -> str:
    """Slack drops the leading whitespace of a piece appended to text already shown."""
    return shown + (piece.lstrip() if shown else piece)


def apply_tasks(state: StreamState, chunks: list[dict[str, Any]]) -> None:
    for chunk in chunks:
        if chunk.get("type") != "task_update":
            continue
        task = state.tasks.setdefault(str(chunk["id"]), {"details": ""})
        task["title"] = chunk["title"]
        task["status"] = chunk["status"]
        if chunk.get("details"):
            task["details"] += str(chunk["details"])
        if chunk.get("output"):
            task["output"] = chunk["output"]


def now() -> float:
    return time.monotonic()
