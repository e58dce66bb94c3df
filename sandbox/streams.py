"""Native streaming (`chat.startStream`, `chat.appendStream`, `chat.stopStream`) with Slack's
rules: a streamed message is a reply in a thread, it grows by appended Markdown and task
updates, and once stopped only `chat.update` changes it."""

from __future__ import annotations

import json
import time
from typing import Any

from sandbox.workspace import BOT_USER_ID, Message, Workspace

MARKDOWN_MAX = 12_000
STREAM_LIFETIME = 300.0


def _pieces(args: dict[str, Any]) -> tuple[str, list[dict[str, Any]]] | str:
    text = str(args.get("markdown_text") or "")
    chunks = args.get("chunks") or []
    if isinstance(chunks, str):
        chunks = json.loads(chunks)
    if not isinstance(chunks, list):
        return "invalid_chunks"
    others: list[dict[str, Any]] = []
    for chunk in chunks:
        if not isinstance(chunk, dict):
            return "invalid_chunks"
        if chunk.get("type") == "markdown_text":
            text += str(chunk.get("text") or "")
        else:
            others.append(chunk)
    if len(text) > MARKDOWN_MAX:
        return "msg_too_long"
    return text, others


def _apply(message: Message, text: str, chunks: list[dict[str, Any]]) -> None:
    if text:
        message.text += text.lstrip() if message.text else text
    for chunk in chunks:
        if chunk.get("type") != "task_update" or not chunk.get("id"):
            continue
        task = message.tasks.setdefault(str(chunk["id"]), {"details": ""})
        task["title"] = chunk.get("title", task.get("title", ""))
        task["status"] = chunk.get("status", task.get("status", "pending"))
        if chunk.get("details"):
            task["details"] += str(chunk["details"])
        if chunk.get("output"):
            task["output"] = chunk["output"]


def start(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    channel, thread_ts = str(args.get("channel") or ""), str(args.get("thread_ts") or "")
    if channel not in ws.channels or not thread_ts:
        return {"ok": False, "error": "invalid_arguments"}
    for name in ("recipient_user_id", "recipient_team_id"):
        if not args.get(name):
            return {"ok": False, "error": f"missing_{name}"}
    if ws.find(channel, thread_ts) is None:
        return {"ok": False, "error": "thread_not_found"}
    parsed = _pieces(args)
    if isinstance(parsed, str):
        return {"ok": False, "error": parsed}
    message = Message(ws.next_ts(), "", BOT_USER_ID, thread_ts, streaming=True)
    message.started_at = time.monotonic()
    _apply(message, *parsed)
    ws.add(message, channel)
    return {"ok": True, "channel": channel, "ts": message.ts}


def _open(ws: Workspace, args: dict[str, Any]) -> tuple[str, Message] | dict[str, Any]:
    channel = str(args.get("channel") or "")
    message = ws.find(channel, str(args.get("ts") or ""))
    if message is None:
        return {"ok": False, "error": "message_not_found"}
    if message.streaming and time.monotonic() - message.started_at > STREAM_LIFETIME:
        message.streaming = False
    if not message.streaming:
        return {"ok": False, "error": "message_not_in_streaming_state"}
    return channel, message


def append(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    found = _open(ws, args)
    if isinstance(found, dict):
        return found
    channel, message = found
    parsed = _pieces(args)
    if isinstance(parsed, str):
        return {"ok": False, "error": parsed}
    if not parsed[0] and not parsed[1]:
        return {"ok": False, "error": "no_text"}
    _apply(message, *parsed)
    ws.changed(channel, message)
    return {"ok": True, "channel": channel, "ts": message.ts}


def stop(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    found = _open(ws, args)
    if isinstance(found, dict):
        return found
    channel, message = found
    parsed = _pieces(args)
    if isinstance(parsed, str):
        return {"ok": False, "error": parsed}
    blocks = args.get("blocks")
    if isinstance(blocks, str):
        blocks = json.loads(blocks)
    if isinstance(blocks, list):
        message.blocks = blocks
    _apply(message, *parsed)
    message.streaming = False
    ws.changed(channel, message)
    return {"ok": True, "channel": channel, "ts": message.ts}
