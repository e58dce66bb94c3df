"""Text on cards from model-derived values: escaped, hidden characters shown as codes, clipped
where Slack's limits demand (never inside an entity)."""

from __future__ import annotations

from bot.slack.unlinked import unlinked
from bot.text import escape
from bot.tools.invisible import visible

FIELD_MAX = 2000  # characters of one field of a section


def clip(text: str, limit: int) -> str:
    """At most `limit` characters, never ending inside an `&amp;`-style entity."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    amp = cut.rfind("&")
    if amp != -1 and ";" not in cut[amp:]:
        cut = cut[:amp]
    return cut + "…"


def one_line(text: str) -> str:
    """Text that sits within a field's label on one line (an old value, what a value means):
    a line break in it would start what reads as another field. `↵` shows where one was."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return " ↵ ".join(line.strip() for line in lines if line.strip())


def safe(text: str | None, limit: int) -> str:
    """Model-derived text for mrkdwn: hidden characters as visible codes, never a link
    (`bot.slack.unlinked`), escaped, clipped."""
    return clip(escape(unlinked(visible(text or ""))), limit)
