"""Text on cards from model-derived values: escaped, hidden characters shown as codes, clipped
where Slack's limits demand (never inside an entity)."""

from __future__ import annotations

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


def safe(text: str | None, limit: int) -> str:
    """Model-derived text for mrkdwn: hidden characters as visible codes, escaped, clipped."""
    return clip(escape(visible(text or "")), limit)
