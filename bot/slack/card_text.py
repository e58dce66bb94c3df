"""Text on cards from model-derived values: escaped, hidden characters shown as codes, clipped
where Slack's limits demand (never inside an entity), and a preview's fields (old → new)."""

from __future__ import annotations

from typing import Any

from slack_sdk.models.blocks import Block, MarkdownTextObject, SectionBlock

from bot.text import escape
from bot.tools.invisible import visible

FIELD_MAX = 2000
MAX_CHANGES = 20  # two sections of ten fields


def clip(text: str, limit: int) -> str:
    """At most `limit` characters, never ending inside an `&amp;`-style entity."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    amp = cut.rfind("&")
    if amp != -1 and ";" not in cut[amp:]:
        cut = cut[:amp]
    return cut + "…"


def safe(text: str | None, limit: int) -> str:
    """Model-derived text for mrkdwn: hidden characters as visible codes, escaped, clipped."""
    return clip(escape(visible(text or "")), limit)


SUMMARY_MAX = 300  # a preview value that repeats a long argument is cut to its start here


def change_blocks(changes: list[dict[str, Any]], sent: dict[str, Any] | None = None) -> list[Block]:
    """The preview's fields (a summary of old → new), ten to a section. A new value that is
    the start of a long argument (`sent`) is shortened to point at that argument, shown whole
    under "Exactly what will be sent", rather than repeating it clipped."""
    return [
        SectionBlock(fields=[_change_field(c, sent or {}) for c in changes[start : start + 10]])
        for start in range(0, len(changes), 10)
    ]


def _repeats(new: str, sent: dict[str, Any]) -> tuple[str, int] | None:
    """(argument name, its length) if `new` is the start of a long string argument."""
    if len(new) <= SUMMARY_MAX:
        return None
    start = new[:SUMMARY_MAX]
    for name, value in sent.items():
        if isinstance(value, str) and len(value) > SUMMARY_MAX and value.startswith(start):
            return name, len(value)
    return None


def _change_field(change: dict[str, Any], sent: dict[str, Any]) -> MarkdownTextObject:
    name = safe(str(change.get("field", "")), 100)
    old, new = change.get("old"), change.get("new")
    budget = (FIELD_MAX - len(name) - 20) // 2
    new_text = safe(str(new), budget) if new is not None else "_(empty)_"
    repeated = _repeats(new, sent) if isinstance(new, str) else None
    if repeated:
        argument, length = repeated
        new_text = (
            f"{safe(str(new), SUMMARY_MAX)}\n_(the start of {safe(argument, 100)}: all "
            f"{length:,} characters under Exactly what will be sent)_"
        )
    body = new_text if old is None else f"~{safe(str(old), budget)}~ → {new_text}"
    return MarkdownTextObject(text=f"*{name}*\n{body}")
