"""The arithmetic of a prompt's window: where it starts within a token budget, how a tool
result is cut to its share, and what stands in for a result the requester may not read."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from openai.types.chat import ChatCompletionMessageParam

from bot.conversation import sources as src
from bot.conversation.audiences import WITHHELD
from bot.conversation.tokens import TokenCounter
from bot.db.models import Message


def cap_tool_result(message: ChatCompletionMessageParam, counter: TokenCounter, cap: int) -> Any:
    if message["role"] != "tool":
        return message
    content = str(message.get("content") or "")
    size = counter.text(content)
    if size <= cap:
        return message
    kept = counter.truncate(content, cap)
    note = f"\n[truncated for the model: {cap} of {size} tokens shown]"
    return {**message, "content": src.reclosed(kept, content, note)}


def withheld(message: Message) -> Any:
    """A tool result the requester may not read: its call stays answered, its content not."""
    return {"role": "tool", "tool_call_id": message.tool_call_id or "", "content": WITHHELD}


def budget_start(costs: Sequence[int], roles: Sequence[str], budget: int, max_messages: int) -> int:
    """Earliest index such that messages[start:] cost at most `budget`, number at most
    `max_messages`, and do not begin with a tool result."""
    total, start = 0, len(costs)
    for i in range(len(costs) - 1, -1, -1):
        if total + costs[i] > budget or len(costs) - i > max_messages:
            break
        total += costs[i]
        start = i
    while start < len(roles) and roles[start] == "tool":
        start += 1
    return start


def tool_tail(messages: Sequence[Any]) -> int | None:
    """Where the conversation's closing tool exchange begins (the assistant message whose
    calls the last messages answer), if it ends with one."""
    i = len(messages) - 1
    while i >= 0 and messages[i]["role"] == "tool":
        i -= 1
    if i == len(messages) - 1 or i < 0:
        return None
    return i if messages[i]["role"] == "assistant" and messages[i].get("tool_calls") else None
