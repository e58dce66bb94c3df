"""Text helpers every layer may use (tools included): Slack's three escapes.

Escaping `&`, `<`, `>` turns `<!channel>`, `<@U123>` or `<!subteam^S1>` in model text into
inert characters, so nothing the model writes can ping anyone.
"""

from __future__ import annotations


def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def unescape(text: str) -> str:
    """Slack event text arrives escaped; the model should read it as typed."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
