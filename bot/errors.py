"""Failures in words a person (and the model) can act on, without leaking internals.

Only exceptions whose message is written for people (tool errors, lookups, validation, Slack's
error code, time-outs) are shown as they are. Anything else, a database error with its SQL and
parameters say, is named by its kind only; the details stay in the (redacted) log.
"""

from __future__ import annotations

import logging

import aiohttp
import httpx2
from slack_sdk.errors import SlackApiError

log = logging.getLogger(__name__)


# Slack errors no retry will cure: the message is gone or out of reach, or the call is wrong.
PERMANENT_SLACK_ERRORS = frozenset(
    {
        "message_not_found",
        "channel_not_found",
        "cant_update_message",
        "is_archived",
        "not_in_channel",
        "invalid_blocks",
        "msg_too_long",
        "account_inactive",
        "invalid_auth",
        "token_revoked",
        "missing_scope",
        "not_allowed_token_type",
        # a DM Slack will not open: the person is gone, deactivated or not visible to the bot
        "user_not_found",
        "users_not_found",
        "user_not_visible",
        "user_disabled",
        "cannot_dm_bot",
    }
)


def retryable(exc: BaseException) -> bool:
    """Worth trying again later: a 429, a 5xx, a broken connection, a time-out."""
    if isinstance(exc, SlackApiError):
        return slack_error(exc) not in PERMANENT_SLACK_ERRORS
    return isinstance(exc, aiohttp.ClientError | TimeoutError | ConnectionError)


def slack_error(exc: SlackApiError) -> str:
    """Slack's error code (a proxy's HTML error page has no `error` field)."""
    data = getattr(exc.response, "data", None)
    if isinstance(data, dict) and data.get("error"):
        return str(data["error"])[:100]
    return f"http_{getattr(exc.response, 'status_code', 'error')}"


def plain_error(exc: BaseException) -> str:
    from bot.tools.registry import ToolError  # tools import this module too

    if isinstance(exc, SlackApiError):
        return f"Slack refused the request ({slack_error(exc)})"
    if isinstance(exc, TimeoutError) and not isinstance(exc, ToolError):
        return "the tool did not finish in time"
    if isinstance(exc, aiohttp.ClientError | httpx2.TransportError | ConnectionError):
        return "a service the tool needs could not be reached; try again in a moment"
    if isinstance(exc, ToolError | LookupError | ValueError | PermissionError):
        message = str(exc.args[0]) if exc.args else type(exc).__name__
        return message[:1000]
    log.warning("unexpected %s (details withheld from Slack)", type(exc).__name__, exc_info=exc)
    return f"an internal error occurred ({type(exc).__name__}); the operator's log has details"
