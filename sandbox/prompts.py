"""`assistant.threads.setSuggestedPrompts`, as Slack documents it: up to four prompts, each a
`title` (the button) and a `message` (what the person sends by clicking it), with an optional
`title` above the list, for a thread of a DM with the app (`thread_ts`) or, without one, for
the DM itself. The page shows them as buttons; Slack drops the list once one is used."""

from __future__ import annotations

from typing import Any

from sandbox.views import loads
from sandbox.workspace import Workspace

PROMPTS_MAX = 4  # "up to four suggested prompts" (Slack's usage notes); lengths: none given


def _checked(raw: Any) -> list[dict[str, str]] | None:
    prompts = loads(raw)
    if not isinstance(prompts, list) or not 0 < len(prompts) <= PROMPTS_MAX:
        return None
    found: list[dict[str, str]] = []
    for prompt in prompts:
        if not isinstance(prompt, dict):
            return None
        title, message = prompt.get("title"), prompt.get("message")
        if not (isinstance(title, str) and isinstance(message, str)):
            return None
        if not (title.strip() and message.strip()):
            return None
        found.append({"title": title, "message": message})
    return found


def set_suggested(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    channel_id = str(args.get("channel_id") or "")
    channel = ws.channels.get(channel_id)
    if channel is None or not channel.is_im:
        return {"ok": False, "error": "channel_not_found"}  # only a DM with the app has them
    thread_ts = str(args.get("thread_ts") or "")
    if thread_ts and ws.find(channel_id, thread_ts) is None:
        return {"ok": False, "error": "invalid_thread_ts"}
    prompts = _checked(args.get("prompts"))
    if prompts is None:
        return {"ok": False, "error": "invalid_arguments"}
    title = args.get("title")
    if title is not None and not isinstance(title, str):
        return {"ok": False, "error": "invalid_arguments"}
    key = f"{channel_id}:{thread_ts}"
    ws.prompts[key] = {"title": title or "", "prompts": prompts}
    ws.announce({"type": "prompts", "key": key, "prompts": ws.prompts[key]})
    return {"ok": True}
