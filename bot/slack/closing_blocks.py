"""A finished reply sent as edits carries its closing blocks (the feedback buttons) on its first
message: that message's text as mrkdwn sections (Slack shows blocks instead of `text` once a
message has any), then the closing blocks. The stored answer is keyed by that message."""

from __future__ import annotations

from typing import Any

SECTION_MAX = 3000  # Block Kit: characters of one section's text
MAX_SECTIONS = 10


def with_closing(text: str, closing: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """`text` as sections followed by `closing`; None if it would not fit in blocks."""
    sections: list[dict[str, Any]] = []
    rest = text
    while rest:
        cut = len(rest) if len(rest) <= SECTION_MAX else rest.rfind("\n", 0, SECTION_MAX)
        if cut <= 0:
            cut = rest.rfind(" ", 0, SECTION_MAX)
        if cut <= 0:
            cut = SECTION_MAX
        sections.append({"type": "section", "text": {"type": "mrkdwn", "text": rest[:cut]}})
        rest = rest[cut:].lstrip("\n")
    if not sections or len(sections) > MAX_SECTIONS:
        return None
    return sections + closing
