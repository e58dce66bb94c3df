"""Telling a write that failed from one whose outcome is unknown.

A failure raised before the request could have left (it could not connect, the tool refused
its arguments, the service answered with an error) is a known failure: nothing was written. A
request that went out and whose answer never came back, or came back unreadable, may have been
carried out: that outcome is unknown, and saying "failed" with a bare Retry would invite a
second write. Only the tool's run is judged this way; the re-read before it writes nothing.
"""

from __future__ import annotations

import json
import sys

import aiohttp
import httpx2
from slack_sdk.errors import SlackApiError

from bot.errors import plain_error
from bot.tools.registry import OutcomeUnknown, ToolError

# Raised before a byte of the request was sent: connecting, a full pool, a bad URL.
_NOT_SENT: tuple[type[BaseException], ...] = (
    aiohttp.ClientConnectorError,
    aiohttp.ConnectionTimeoutError,
    aiohttp.InvalidURL,
    httpx2.ConnectError,
    httpx2.ConnectTimeout,
    httpx2.PoolTimeout,
    httpx2.LocalProtocolError,
)

# Raised once the request may have reached the service: the answer is what went missing.
_MAYBE_SENT: tuple[type[BaseException], ...] = (
    OutcomeUnknown,
    TimeoutError,  # asyncio's and the tool's own time-outs
    aiohttp.ClientError,  # disconnected, reset, payload cut off, unreadable body
    httpx2.TransportError,
    httpx2.DecodingError,
    json.JSONDecodeError,
    ConnectionError,
)


def _httpx(sent: bool) -> tuple[type[BaseException], ...]:
    """The same kinds from httpx (the GitHub pack's and the MCP SDK's client). None of its
    exceptions exists before one of them imported it, and a start without them does not."""
    httpx = sys.modules.get("httpx")
    if httpx is None:
        return ()
    if sent:
        return (httpx.TransportError, httpx.DecodingError)
    return (
        httpx.ConnectError,
        httpx.ConnectTimeout,
        httpx.PoolTimeout,
        httpx.UnsupportedProtocol,
        httpx.LocalProtocolError,
    )


def _not_sent(exc: BaseException) -> bool:
    return isinstance(exc, _NOT_SENT + _httpx(sent=False))


def _unreadable_slack_answer(exc: SlackApiError) -> bool:
    """Slack's answer had no readable `ok` (an HTML page from a proxy, a cut-off body) or was
    a server error: the call may have been done."""
    response = exc.response
    data = getattr(response, "data", None)
    status = int(getattr(response, "status_code", 0) or 0)
    return status >= 500 or not (isinstance(data, dict) and "ok" in data)


def _lost(exc: BaseException) -> bool:
    if isinstance(exc, SlackApiError):
        return _unreadable_slack_answer(exc)
    if _not_sent(exc):
        return False
    return isinstance(exc, _MAYBE_SENT + _httpx(sent=True))


def _causes(exc: BaseException) -> list[BaseException]:
    """What `exc` was raised from or while handling, outermost first (a pack that words a
    transport failure as a `ToolError` keeps it there, even `from None`)."""
    found: list[BaseException] = []
    inner = exc.__cause__ or exc.__context__
    while inner is not None and len(found) < 10 and inner not in found:
        found.append(inner)
        inner = inner.__cause__ or inner.__context__
    return found


def outcome_unknown(exc: BaseException) -> bool:
    """True when the write `exc` interrupted may have happened. A `ToolError` is a known
    failure (the tool said in words what went wrong), unless the tool raised it while handling
    a lost answer: a pack that words "GitHub could not be reached" over a dropped connection
    after sending does not know either."""
    if isinstance(exc, ToolError) and not isinstance(exc, OutcomeUnknown):
        causes = [c for c in _causes(exc) if not isinstance(c, ToolError)]
        if any(_not_sent(c) for c in causes):
            return False
        return any(_lost(c) for c in causes)
    return _lost(exc)


def unknown_error(exc: BaseException, finds_earlier_write: bool) -> str:
    """What the card and the model are told about an unknown outcome."""
    if isinstance(exc, OutcomeUnknown) and exc.args:
        why = str(exc.args[0])[:500]
    elif isinstance(exc, TimeoutError):  # a tool's own time-out says what it waited for
        why = str(exc)[:500] or "the tool did not finish in time once it had begun writing"
    else:
        why = f"the answer was lost ({plain_error(exc)})"
    then = (
        "Retry looks for the earlier write first and writes only if it is not there."
        if finds_earlier_write
        else "Check the destination before retrying: a retry may write a second time."
    )
    return f"outcome unknown: {why}; it may or may not have been carried out. {then}"
