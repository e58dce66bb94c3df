"""Who waits on the `chat.update` budget (`bot.slack.edit_budget`): an editor (a live reply
or an approval card), its lane, and its place in the queue."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Protocol


class Editor(Protocol):
    """What the budget needs to know about a reply that wants to edit."""

    @property
    def wants_final(self) -> bool: ...

    @property
    def last_edit_at(self) -> float | None: ...


def lane_of(editor: Editor) -> str:
    """ "reply" unless the editor says otherwise (approval cards say "card")."""
    return str(getattr(editor, "lane", "reply"))


class BudgetClosed(RuntimeError):
    """The process is shutting down; no more edits will be granted."""


@dataclass(order=True)
class Waiter:
    """A reply waiting for its turn to edit, in arrival order (`seq`)."""

    seq: int
    editor: Editor = field(compare=False)
    future: asyncio.Future[None] = field(compare=False)
