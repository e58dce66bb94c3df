"""What an approver is shown of a write: the exact arguments it will send, as text a person can
read without being fooled.

One function, `shown_arguments`, turns the arguments that will be sent into what a card shows,
for every pack alike: each argument's whole value as text (strings as they are, anything else
as JSON), with the characters that hide themselves made visible as codes (`[U+202E]`), and notes
on what the text will do at its destination that the characters alone do not say (a link's real
target beside its text, a mention that notifies people). The card and its "Show all" modal only
lay this out; nothing here knows about Slack's blocks beyond the sizes a modal can hold, so a
value no modal could show is refused before any card is made (`unshowable`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from bot.tools.invisible import code_of, hidden, hidden_count, utf16_len, visible
from bot.tools.shown_notes import Mentions, notes_for

__all__ = [
    "CHUNK",
    "MAX_ARGUMENTS",
    "MAX_SHOWN",
    "Mentions",
    "ShownValue",
    "chunks",
    "shown_arguments",
    "unshowable",
    "utf16_len",
    "value_text",
    "visible",
]

# A modal holds 100 blocks of at most 3,000 characters each (Slack counts UTF-16 units); a few
# blocks go to the modal's header, so a value may take this many chunks of `CHUNK` units.
CHUNK = 2900
MODAL_BLOCKS = 100
MODAL_HEADER_BLOCKS = 4
MAX_CHUNKS = MODAL_BLOCKS - MODAL_HEADER_BLOCKS
MAX_SHOWN = MAX_CHUNKS * CHUNK  # UTF-16 units of one value's shown text
MAX_ARGUMENTS = 45  # a card lists 12, its modal (two blocks each) the rest


def value_text(value: Any) -> str:
    """An argument's value as text: a string as it is, anything else as compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def chunks(text: str, size: int = CHUNK) -> list[str]:
    """`text`'s shown form (`visible`) in pieces of at most `size` UTF-16 units, each piece
    the shown form of a run of the raw text, so a code is never cut in two and the pieces
    joined are exactly `visible(text)`."""
    pieces: list[str] = []
    current: list[str] = []
    used = 0
    for char in text:
        shown = code_of(char) if hidden(char) else char
        width = utf16_len(shown)
        if used + width > size and current:
            pieces.append("".join(current))
            current, used = [], 0
        current.append(shown)
        used += width
    if current or not pieces:
        pieces.append("".join(current))
    return pieces


@dataclass(frozen=True)
class ShownValue:
    """One argument as the approver sees it."""

    name: str
    raw: str  # the value as text, character for character what is sent
    text: str  # `raw` with hidden characters as visible codes
    notes: tuple[str, ...]  # what the text does that its characters do not say

    @property
    def length(self) -> int:
        """Characters the write sends for this argument."""
        return len(self.raw)

    @property
    def shown_length(self) -> int:
        return utf16_len(self.text)


def shown_value(name: str, value: Any, mentions: Mentions = Mentions.UNKNOWN) -> ShownValue:
    raw = value_text(value)
    return ShownValue(name, raw, visible(raw), notes_for(raw, mentions, hidden_count(raw)))


def shown_arguments(
    arguments: dict[str, Any], mentions: Mentions = Mentions.UNKNOWN
) -> list[ShownValue]:
    """Every argument that will be sent, in the order the tool declares them. An argument
    left unset (None) is not sent as a value and is not listed."""
    return [
        shown_value(name, value, mentions) for name, value in arguments.items() if value is not None
    ]


def unshowable(arguments: dict[str, Any]) -> str | None:
    """Why these arguments cannot be shown in full (a value longer than a modal holds in all
    its blocks, or more arguments than a card and its modal can list), or None. Said to the
    model, which may shorten the value and call again."""
    count = sum(1 for value in arguments.values() if value is not None)
    if count > MAX_ARGUMENTS:
        return (
            f"{count} arguments are more than an approver can be shown (at most "
            f"{MAX_ARGUMENTS}); nothing was proposed. Leave out the ones that are not needed."
        )
    for name, value in arguments.items():
        if value is None:
            continue
        raw = value_text(value)
        if len(raw) * 10 < MAX_SHOWN:
            continue  # fits even if every character showed as a code
        if len(chunks(raw)) > MAX_CHUNKS:
            return (
                f"{name}: {len(raw)} characters is more than an approver can be shown "
                f"(at most about {MAX_SHOWN:,} characters, invisible characters counting "
                "as their visible codes); nothing was proposed. Shorten it or split the "
                "write into several smaller ones."
            )
    return None
