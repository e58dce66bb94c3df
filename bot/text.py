"""Text helpers every layer may use (tools included): Slack's three escapes.

Escaping `&`, `<`, `>` turns `<!channel>`, `<@U123>` or `<!subteam^S1>` in model text into
inert characters, so nothing the model writes can ping anyone. `defuse` is the poster's last
guard: it makes the broadcast pings inert in whatever the bot sends, escaped or not.
"""

from __future__ import annotations

import re
from typing import Any

_PING = re.compile(r"<(!(?:channel|here|everyone|group)(?:\|[^>]*)?|!subteam\^[^>]*)>")


def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def unescape(text: str) -> str:
    """Slack event text arrives escaped; the model should read it as typed."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def defuse(text: str) -> str:
    """`<!channel>`, `<!here>`, `<!everyone>`, `<!subteam^…>` made inert (Slack's escapes)."""
    if "<!" not in text:
        return text
    return _PING.sub(lambda m: f"&lt;{m.group(1)}&gt;", text)


def defuse_blocks(value: Any) -> Any:
    """`defuse` applied to every string inside Block Kit blocks."""
    if isinstance(value, str):
        return defuse(value)
    if isinstance(value, list):
        return [defuse_blocks(v) for v in value]
    if isinstance(value, dict):
        return {k: defuse_blocks(v) for k, v in value.items()}
    return value
