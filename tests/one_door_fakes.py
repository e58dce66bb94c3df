"""The fakes' side of the one-door test: a model scripted per request (tests/one_door_bot.py
asks it for one write per job), and what Slack received, read as messages shown to someone."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tests.fakes.openai import FakeOpenAI, Script, ScriptedToolCall
from tests.fakes.slack import Call
from tests.one_door_world import EXEC

SHOWN_IN_CHANNEL = (
    "chat.postMessage",
    "chat.update",
    "chat.scheduleMessage",
    "chat.startStream",
    "chat.appendStream",
    "chat.stopStream",
    "chat.meMessage",
)


class ScriptedModel(FakeOpenAI):
    """A model that answers each job by the tag in the request's last message: a mention
    holding `job:KEY` gets KEY's first tool calls (a read of #exec, or the write); the result of
    that read gets the write; a prompt holding the result of KEY's write, settled, once, the
    write that `follow_ups` plans for KEY's turn when it resumes (tests/one_door_continues.py:
    other turns of the thread may have written since); anything else (a resume after the
    write) a short text."""

    def __init__(self) -> None:
        super().__init__(default=Script(text="ok"))
        self.plans: dict[str, list[Script]] = {}
        self.follow_ups: dict[str, Script] = {}  # KEY -> what its turn asks for next

    def plan(self, key: str, *scripts: Script) -> None:
        self.plans[key] = list(scripts)

    def _next_script(self, body: dict[str, Any]) -> Script:
        messages = body.get("messages") or []
        last = messages[-1] if messages else {}
        if last.get("role") == "user":
            content = str(last.get("content", ""))
            for key, plan in self.plans.items():
                if f"job:{key} " in content:
                    return plan[0]
        if last.get("role") == "tool":
            called = str(last.get("tool_call_id", ""))
            if called.startswith("r-"):
                after = self.plans.get(called[2:], [])
                if len(after) > 1:
                    return after[1]
        for message in reversed(messages):  # a turn resumed: the newest write settled
            called = str(message.get("tool_call_id", ""))
            settled = "pending_approval" not in str(message.get("content", ""))
            if message.get("role") == "tool" and settled and called[2:] in self.follow_ups:
                return self.follow_ups.pop(called[2:])
        return self.default


def write_call(key: str, tool: str, args: dict[str, Any]) -> ScriptedToolCall:
    return ScriptedToolCall(f"w-{key}", tool, json.dumps(args))


def read_exec(key: str, channel: str = EXEC) -> ScriptedToolCall:
    """A read of `channel`'s recent messages (#exec by default): a tool result in the turn."""
    return ScriptedToolCall(
        f"r-{key}", "get_recent_messages", json.dumps({"channel": channel, "limit": 5})
    )


@dataclass
class SentMessage:
    method: str
    places: set[str] | None  # the channels it was posted in (None: shown to `viewers`)
    viewers: set[str] | None  # who sees it, when it is shown to named people only
    body: str


def sent_messages(calls: list[Call], triggers: dict[str, str]) -> list[SentMessage]:
    """The calls that showed something to someone, with where (or to whom) it was shown;
    `triggers`: who clicked, by the trigger id of their click (a modal is theirs)."""
    sent = []
    for call in calls:
        if not call.ok:
            continue
        args = call.args
        body = json.dumps(args, ensure_ascii=False)
        if call.method in SHOWN_IN_CHANNEL:
            sent.append(SentMessage(call.method, {str(args.get("channel"))}, None, body))
        elif call.method == "chat.postEphemeral":
            sent.append(SentMessage(call.method, None, {str(args.get("user"))}, body))
        elif call.method in ("views.open", "views.push"):
            who = triggers.get(str(args.get("trigger_id")), "")
            sent.append(SentMessage(call.method, None, {who} if who else set(), body))
        elif call.method == "views.publish":
            sent.append(SentMessage(call.method, None, {str(args.get("user_id"))}, body))
    return sent
