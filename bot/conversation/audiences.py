"""Which stored messages a requester's prompt may hold, decided by each message's audience.

A message whose audience the requester cannot read is left out, without ever splitting an
assistant `tool_calls` message from its results: a result they may not read stays, with its
content replaced by `WITHHELD`; an assistant message they may not read goes with all of its
results. The answer is by who may read what (asked of Slack), never by position in the thread.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from bot.db.models import Message, Role

# May the turn's requester read data of this audience?
Reader = Callable[[str | None], Awaitable[bool]]

WITHHELD = json.dumps({"status": "withheld", "reason": "private to another audience"})


@dataclass(frozen=True)
class Kept:
    message: Message
    shown: bool  # False: a tool result whose content is withheld


class CachedReader:
    """One answer per distinct audience within a prompt (a thread has only a few)."""

    def __init__(self, reader: Reader) -> None:
        self.reader = reader
        self._known: dict[str, bool] = {}

    async def __call__(self, audience: str | None) -> bool:
        key = audience or ""
        if key not in self._known:
            self._known[key] = await self.reader(audience)
        return self._known[key]


async def readable(stored: Sequence[Message], reader: Reader) -> list[Kept]:
    may = CachedReader(reader)
    kept: list[Kept] = []
    dropped_calls: set[str] = set()
    for message in stored:
        allowed = await may(message.audience)
        if message.role == Role.TOOL:
            if message.tool_call_id in dropped_calls:
                continue
            kept.append(Kept(message, allowed))
            continue
        if allowed:
            kept.append(Kept(message, True))
        elif message.tool_calls:
            dropped_calls |= {str(c.get("id")) for c in message.tool_calls}
    return kept
