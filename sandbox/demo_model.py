"""A built-in demo model behind an OpenAI-compatible endpoint (`/demo-model/v1`), for trying
the sandbox without any model settings. It is not a language model: it recognises a few
requests, enough to show the flows, and says what it is in the footer of every reply.

* "create a task …" proposes `create_task` with the rest as the title ("… for @bob" assigns
  it to that sandbox person, "… by 2026-12-04" sets its due date);
* "summarise #general" (or any "#channel") reads the channel's recent messages, then answers;
* "read #exec" tries the private channel (refused for someone who is not a member);
* "list the open tasks" (or "show … tasks") lists the board's open tasks;
* "what can you do" says what it can do and which of it needs an approval;
* "what is in this file" (and the like) answers from the files the bot read (demo_files.py);
* anything else gets a plain answer of a few sentences, streamed over a few seconds.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
import uuid
from datetime import date, timedelta
from typing import Any

from aiohttp import web

from sandbox import demo_files

MODEL = "countersign-demo"
FOOTER = "_— demo model: a scripted stand-in, not an AI (the OpenAI settings give a real one)._"
CHANNELS = {"general": "C0GENERAL", "exec": "C0EXEC"}
CREATE = re.compile(r"\bcreate (?:a )?task\b[\s:,-]*(?:to\s+)?(?P<rest>.*)", re.I | re.S)
CHANNEL = re.compile(r"(?:<#(?P<id>[A-Z0-9]+)(?:\|[^>]*)?>|#(?P<name>[a-z0-9_-]+))", re.I)
READ = re.compile(r"\b(summari[sz]e|read|catch me up|what'?s (new|happening))\b", re.I)
BOARD = re.compile(r"\b(list|show)\b[^.?!]*\btasks\b", re.I)
SOME_CHANNEL = re.compile(r"\bchannel\b", re.I)
CAN_DO = re.compile(r"\bwhat can you do\b", re.I)
TOKEN_DELAY = 0.09  # a plain answer of ~70 words streams over about six seconds
WORD_DELAY_SETTING = "SANDBOX_WORD_DELAY"
PACE = web.AppKey("demo_model_pace", float)


def word_delay(environ: dict[str, str] | None = None) -> float:
    """`SANDBOX_WORD_DELAY`: seconds between the words of the plain answer (default 0.09, so
    a newcomer watches it grow; 0 to 1). A value that is not one is a `ValueError` naming it."""
    raw = (os.environ if environ is None else environ).get(WORD_DELAY_SETTING, "").strip()
    if not raw:
        return TOKEN_DELAY
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise ValueError(
            f"{WORD_DELAY_SETTING}={raw!r} is not a number of seconds from 0 to 1 "
            f"(the pause between the demo model's words; default {TOKEN_DELAY})"
        )
    return value


PLAIN = (
    "Here is a plain answer, streamed a few words at a time so you can watch it grow. "
    "I am the sandbox's demo model: I can summarise #general, create a task (which waits for "
    "an approver's click before anything is written), and show that a guest cannot have me "
    'read #exec. In #general, try "@Countersign create a task to review the release notes", '
    "then switch to Bob to approve it."
)
ABILITIES = (
    "I can look things up on my own: the recent messages of a channel you are in, and the "
    "tasks on the team's board. Anything that writes (creating or changing a task, posting "
    "for you) first becomes an approval card: nothing happens until an approver clicks "
    "*Approve* (in this sandbox, Bob, and never for his own requests)."
)
WHICH_CHANNEL = 'Which channel? Say for example "summarise #general".'


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


def decide(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """The reply's text and tool calls for a conversation, as the demo understands it."""
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return _after_tool(messages), []
    # The person's own words: never a file's or another's text, which the bot marks as data.
    last, request = demo_files.request_of(messages)
    created = CREATE.search(request)
    if created and created.group("rest").strip():
        asker = str(last.get("name") or "")
        return "", [_call("create_task", _task_args(created.group("rest"), asker))]
    named = CHANNEL.search(request)
    if named and READ.search(request):
        channel = named.group("id") or CHANNELS.get(named.group("name").lower(), "")
        return "", [_call("get_recent_messages", {"channel": channel, "limit": 20})]
    about_files = demo_files.answer(messages, request)
    if about_files is not None:
        return about_files, []
    if CAN_DO.search(request):
        return ABILITIES, []
    if BOARD.search(request):
        return "", [_call("list_tasks", {"status": "open"})]
    if READ.search(request) and SOME_CHANNEL.search(request):
        return WHICH_CHANNEL, []
    return PLAIN, []


ASSIGNEE = re.compile(r"\s+for @(?P<name>[a-z]+)\b", re.I)
DUE = re.compile(r"\s+by (?P<day>\d{4}-\d{2}-\d{2})\b")


FOR_ME = re.compile(r"^for me\b[\s,]*(?:to\s+)?", re.I)
DUE_DAY = re.compile(r",?\s+(?:due|by) (?P<day>monday|tuesday|wednesday|thursday|friday)\b", re.I)
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday")


def _next(weekday: str, today: date | None = None) -> str:
    """The next such weekday after today, as a date."""
    today = today or date.today()
    ahead = (WEEKDAYS.index(weekday.lower()) - today.weekday() - 1) % 7 + 1
    return (today + timedelta(days=ahead)).isoformat()


def _task_args(rest: str, asker: str = "") -> dict[str, Any]:
    rest = " ".join(rest.split()).rstrip(".")
    extra: dict[str, Any] = {}
    if found := FOR_ME.search(rest):  # "for me": the person asking (the request's `name`)
        if re.fullmatch(r"U[A-Z0-9]+", asker):
            extra["assignee"] = asker
        rest = rest[found.end() :]
    if found := DUE_DAY.search(rest):
        extra["due_date"] = _next(found.group("day"))
        rest = rest[: found.start()] + rest[found.end() :]
    if found := ASSIGNEE.search(rest):  # the sandbox's people are U + their name (UBOB)
        extra["assignee"] = f"U{found.group('name').upper()}"
        rest = rest[: found.start()] + rest[found.end() :]
    if found := DUE.search(rest):
        extra["due_date"] = found.group("day")
        rest = rest[: found.start()] + rest[found.end() :]
    if len(rest) <= 120:
        return {"title": rest, **extra}
    return {"title": rest[:100].rsplit(" ", 1)[0] + " …", "description": rest, **extra}


def _call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"id": f"call_{uuid.uuid4().hex[:12]}", "name": name, "arguments": json.dumps(arguments)}


# A read's result reaches the model as data (`<data source="…">…</data>`, bot/provenance.py).
DATA_BLOCK = re.compile(r'\A<data source="[^"\n]*">\n(.*)\n</data>', re.DOTALL)


def _inside_data(text: str) -> str:
    found = DATA_BLOCK.match(text)
    return found.group(1) if found else text


def _after_tool(messages: list[dict[str, Any]]) -> str:
    result_text = _text(messages[-1])
    try:
        result: Any = json.loads(_inside_data(result_text))
    except json.JSONDecodeError:
        result = {"error": result_text}
    if not isinstance(result, dict):
        result = {"result": result}
    status = result.get("status")
    if status == "declined":
        reason = result.get("reason") or "no reason given"
        return f"Understood: I won't do that. The reason I was given: “{reason}”."
    if status == "changes_requested":
        note = result.get("note") or "no note given"
        return f"The approver asked for changes: “{note}”. Say what to change; I'll ask again."
    if status == "expired":
        return "Nobody approved that in time, so nothing was written."
    if status == "succeeded":
        title = _arguments_of(messages, str(messages[-1].get("tool_call_id"))).get("title")
        return f"Done: the task “{title}” is on the board." if title else "Done: it ran."
    if status in ("failed", "error", "invalid_arguments") or "error" in result:
        why = result.get("error") or result.get("message") or "it did not work"
        return f"I couldn't do that: {why}"
    tasks = result.get("tasks")
    if isinstance(tasks, list):
        return _board(tasks)
    found = result.get("messages")
    if isinstance(found, list):
        said = [
            str(m.get("text", "")) for m in found if isinstance(m, dict) and m.get("user") != "UBOT"
        ]
        # What people said to each other, not what they asked the assistant.
        lines = [f"• {text[:120]}" for text in said if "<@UBOT>" not in text][:6]
        return f"Here are the latest {len(lines)} message(s) I can see there:\n" + "\n".join(lines)
    return "Done."


def _board(tasks: list[Any]) -> str:
    """The open tasks, a line each (the title, who does it, when it is due)."""
    shown = [t for t in tasks if isinstance(t, dict)][:10]
    if not shown:
        return 'The board has no open tasks. Try "create a task to review the release notes".'
    lines = []
    for task in shown:
        line = f"• {str(task.get('title') or 'untitled')[:120]}"
        if task.get("assignee"):
            line += f", for <@{task['assignee']}>"
        if task.get("due_date"):
            line += f", due {task['due_date']}"
        lines.append(line)
    return f"{len(shown)} open task(s) on the board:\n" + "\n".join(lines)


def _arguments_of(messages: list[dict[str, Any]], call_id: str) -> dict[str, Any]:
    """The arguments the model gave the tool call `call_id`."""
    for message in reversed(messages):
        for call in message.get("tool_calls") or []:
            if call.get("id") == call_id:
                try:
                    found = json.loads((call.get("function") or {}).get("arguments") or "{}")
                except json.JSONDecodeError:
                    return {}
                return found if isinstance(found, dict) else {}
    return {}


async def completions(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    messages = body.get("messages") or []
    if not body.get("stream"):
        return web.json_response(_summary(body))
    text, calls = decide(messages)
    if text:
        text = f"{text}\n\n{FOOTER}"
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    created = int(time.time())

    async def send(delta: dict[str, Any], finish: str | None = None) -> None:
        chunk = {
            "id": "chatcmpl-demo",
            "object": "chat.completion.chunk",
            "created": created,
            "model": MODEL,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        await response.write(f"data: {json.dumps(chunk)}\n\n".encode())

    await send({"role": "assistant", "content": ""})
    delay = request.app[PACE] if text == f"{PLAIN}\n\n{FOOTER}" else 0.01
    for token in re.findall(r"\s*\S+|\s+", text):
        await asyncio.sleep(delay)
        await send({"content": token})
    for index, call in enumerate(calls):
        fragment = {
            "index": index,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["name"], "arguments": call["arguments"]},
        }
        await send({"tool_calls": [fragment]})
    await send({}, "tool_calls" if calls else "stop")
    if (body.get("stream_options") or {}).get("include_usage"):
        # About what a real model would count (four characters a token): the messages and
        # the tools' schemas, so the sandbox's demo budget is used as a real one would be.
        prompt = len(json.dumps(messages)) // 4 + len(json.dumps(body.get("tools") or [])) // 4
        completion = len(text) // 4 + sum(len(c["arguments"]) // 4 for c in calls)
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
        last = {"id": "chatcmpl-demo", "object": "chat.completion.chunk", "created": created}
        last |= {"model": MODEL, "choices": [], "usage": usage}
        await response.write(f"data: {json.dumps(last)}\n\n".encode())
    await response.write(b"data: [DONE]\n\n")
    return response


def _title(messages: list[dict[str, Any]]) -> str | None:
    """A conversation's title, when the bot asks for one: the request's first words."""
    asked = " ".join(_text(m) for m in messages if m.get("role") == "system").lower()
    if "title" not in asked:
        return None
    words = re.sub(r"<[^>]*>", " ", _text(messages[-1])).split()[:5]
    return " ".join(words).strip(" ?.!").capitalize() or "A conversation"


def _summary(body: dict[str, Any]) -> dict[str, Any]:
    """Non-streamed requests: a title for a new conversation, or a summary of a long one."""
    title = _title(body.get("messages") or [])
    return {
        "id": "chatcmpl-demo-summary",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {
                    "role": "assistant",
                    "content": title or "Earlier: a conversation (demo).",
                },
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


async def models(_request: web.Request) -> web.Response:
    return web.json_response(
        {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "sandbox"}]}
    )


def routes(app: web.Application, pace: float = TOKEN_DELAY) -> None:
    """The demo model's endpoints; `pace`: seconds between the plain answer's words."""
    app[PACE] = pace
    app.router.add_post("/demo-model/v1/chat/completions", completions)
    app.router.add_get("/demo-model/v1/models", models)
