"""Tool calls as a model streams them: fragments accumulated by `index`, the way OpenAI sends
them. The first fragment of a call carries its id and name, later ones carry pieces of the
arguments, and fragments of several calls may interleave."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text as the model produced it; validated by the tool layer

    def as_openai(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class ToolCallAccumulator:
    """Assembles streamed tool-call fragments by index into complete calls.

    Compatible servers differ: some omit `index` for a single call, some repeat the function
    name in every fragment, some send empty or repeated ids. Every assembled call gets an id of
    its own, because each must be answered by exactly one `tool` message.
    """

    def __init__(self) -> None:
        self._calls: dict[int, _PartialCall] = {}

    def add(self, fragments: Iterable[Any]) -> None:
        """Add a chunk's `delta.tool_calls`, as the server sent them (JSON objects)."""
        for fragment in fragments:
            if not isinstance(fragment, dict):
                raise ValueError("a tool-call fragment is not an object")
            index = fragment.get("index")
            fragment_id = fragment.get("id")
            if not isinstance(index, int) or isinstance(index, bool):
                last = max(self._calls, default=None)  # no index: a new id starts the next call
                if last is None:
                    index = 0
                elif fragment_id and fragment_id != self._calls[last].id:
                    index = last + 1
                else:
                    index = last
            call = self._calls.setdefault(index, _PartialCall())
            if isinstance(fragment_id, str) and fragment_id:
                call.id = fragment_id
            function = fragment.get("function")
            if isinstance(function, dict):
                name = function.get("name")
                if isinstance(name, str) and name and name != call.name:
                    call.name += name
                arguments = function.get("arguments")
                if isinstance(arguments, str) and arguments:
                    call.arguments.append(arguments)

    def calls(self) -> list[ToolCall]:
        seen: set[str] = set()
        calls = []
        for _, c in sorted(self._calls.items()):
            call_id = c.id[:100]
            if not call_id or call_id in seen:
                call_id = f"call_cs_{uuid.uuid4().hex[:20]}"
            seen.add(call_id)
            calls.append(
                ToolCall(id=call_id, name=c.name[:128], arguments="".join(c.arguments) or "{}")
            )
        return calls
