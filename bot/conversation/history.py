"""Stored messages in the model's shape, and what makes a history valid.

Which messages go to the model (a token-budgeted suffix plus a summary) is `memory.py`'s job.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from openai.types.chat import ChatCompletionMessageParam

from bot.conversation.sources import as_data


class StoredMessage(Protocol):
    @property
    def role(self) -> str: ...
    @property
    def content(self) -> str | None: ...
    @property
    def tool_calls(self) -> list[dict[str, Any]] | None: ...
    @property
    def tool_call_id(self) -> str | None: ...
    @property
    def slack_user(self) -> str | None: ...


def window_start(roles: Sequence[str], max_messages: int) -> int:
    """Index where the window of at most `max_messages` begins."""
    start = max(0, len(roles) - max_messages)
    while start < len(roles) and roles[start] == "tool":
        start += 1
    return start


# A write call whose proposal is still waiting for a person (its result is filled in later).
PENDING = (
    '{"status": "pending_approval", "note": "A person has not decided on this action yet; '
    'it has not been carried out."}'
)


def shown_text(message: StoredMessage, text: str, requester: str | None) -> str:
    """A message's text as `requester`'s prompt shows it: anything but their own words (or
    the bot's) is delimited as data (`bot.conversation.sources`)."""
    return as_data(text, message, requester)


def to_openai(message: StoredMessage, requester: str | None = None) -> ChatCompletionMessageParam:
    """`message` in the model's shape, for a prompt of `requester`'s turn (None: as stored)."""
    role = str(message.role)
    if role == "tool":
        return {
            "role": "tool",
            "tool_call_id": message.tool_call_id or "",
            "content": shown_text(message, message.content, requester)
            if message.content is not None
            else PENDING,
        }
    if role == "assistant":
        out: dict[str, Any] = {"role": "assistant", "content": message.content}
        if message.tool_calls:
            out["tool_calls"] = message.tool_calls
        return out  # type: ignore[return-value]
    if role == "user":
        user: dict[str, Any] = {
            "role": "user",
            "content": shown_text(message, message.content or "", requester),
        }
        if message.slack_user:
            user["name"] = message.slack_user
        return user  # type: ignore[return-value]
    return {"role": "system", "content": shown_text(message, message.content or "", requester)}


def is_valid_history(messages: Sequence[StoredMessage]) -> bool:
    """Every tool result follows the assistant call it answers, and every call is answered
    before the next non-tool message."""
    pending: set[str] = set()
    for m in messages:
        role = str(m.role)
        if role == "tool":
            if m.tool_call_id not in pending:
                return False
            pending.discard(m.tool_call_id)
            continue
        if pending:
            return False
        if role == "assistant" and m.tool_calls:
            pending = {str(c["id"]) for c in m.tool_calls}
    return True
