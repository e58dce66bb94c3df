"""What goes wrong with an MCP server, as errors a tool call raises and as plain words (the
connection's log lines and the model's tool results say why, never a URL's or header's
secret)."""

from __future__ import annotations

import httpx2
from mcp.shared.exceptions import MCPError

from bot.tools.registry import ToolError


class Unreachable(ToolError):
    """The server is down or the connection broke; nothing was sent, or it is unknown."""


class TimedOut(ToolError, TimeoutError):
    """The call was sent and no answer came in time: it may have run on the server. A
    `TimeoutError` too, so whatever treats a time-out as an unknown outcome sees it as one."""


def describe(exc: BaseException, http_status: int | None = None) -> str:
    """A failure in words, without the URL's or headers' secrets (only types and codes).
    `http_status`: the last HTTP error status seen (the SDK reports a refused request only as
    a generic JSON-RPC error)."""
    if http_status in (401, 403):
        return f"it answered HTTP {http_status}: the credentials in its headers were refused"
    if http_status is not None:
        return f"it answered HTTP {http_status}"
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return describe(exc.exceptions[0])
    if isinstance(exc, MCPError):
        return f"it answered with error {exc.code}: {exc.message[:200]}"
    if isinstance(exc, FileNotFoundError):
        return "its command was not found"
    if isinstance(exc, httpx2.HTTPStatusError):
        return f"it answered HTTP {exc.response.status_code}"
    if isinstance(exc, httpx2.TransportError | OSError | ConnectionError):
        return f"it could not be reached ({type(exc).__name__})"
    if isinstance(exc, TimeoutError):
        return "it did not answer in time"
    return f"the connection failed ({type(exc).__name__})"
