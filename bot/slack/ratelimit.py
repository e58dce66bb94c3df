"""slack_sdk's own rate-limit retry handler, taught to tell the workspace's budgets about a 429
of `chat.update`.

A `chat.update` 429 is reported (`Retry-After`), also the last one of a call that has no retry
left: the edit budget pauses and learns a lower rate, so the other replies hold their edits
instead of each running into the same 429. The handler then sleeps out `Retry-After` and
retries the edit. Every other method's 429 comes back to the budgeted client
(`bot/slack/web_client.py`), which reports it with the call's channel and retries through the
method's budget (the streaming methods and cosmetic calls not at all: a reply whose append was
refused can still close its stream with its final text instead of sitting out a minute inside
one call).

`Retry-After` is read defensively. Slack counts a sliding minute, so it never needs to ask for
more than `RETRY_AFTER_CAP_SECONDS`; a larger value (or `inf`) is taken as the cap, and one that
is not a number (garbage, `nan`, negative) as `RETRY_AFTER_DEFAULT_SECONDS`, each logged once per
method as a warning naming the method and the value. Without that, `Retry-After: inf` would
pause a method for good (and crash slack_sdk's own sleep, which parses it with `int()`).
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
from collections.abc import Callable, Mapping
from typing import Any

from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState

from bot.slack.learned_rates import RETRY_AFTER_CAP_SECONDS

log = logging.getLogger(__name__)

# When Slack's answer carries no usable Retry-After (it always should).
RETRY_AFTER_DEFAULT_SECONDS = 1.0


def _header(response: HttpResponse) -> str | None:
    return header(response.headers)


def header(headers: Mapping[str, Any]) -> str | None:
    """The `Retry-After` header's value (slack_sdk gives lists of values, or values)."""
    for name, values in headers.items():
        value = values[0] if isinstance(values, list) and values else values
        if name.lower() == "retry-after" and value:
            return str(value)
    return None


def read_retry_after(raw: str | None) -> tuple[float, bool]:
    """Seconds to wait for a `Retry-After` header value, and whether the value was absurd
    (then the seconds are the cap or the default)."""
    if raw is None:
        return RETRY_AFTER_DEFAULT_SECONDS, False
    try:
        seconds = float(raw.strip())
    except ValueError:
        return RETRY_AFTER_DEFAULT_SECONDS, True
    if math.isnan(seconds) or seconds < 0:
        return RETRY_AFTER_DEFAULT_SECONDS, True
    if seconds > RETRY_AFTER_CAP_SECONDS:  # also inf
        return RETRY_AFTER_CAP_SECONDS, True
    return seconds, False


# Retried here; every other method's 429 is the budgeted client's (`bot/slack/web_client.py`).
RETRIED = frozenset({"chat.update"})


def _method(request: HttpRequest) -> str:
    return request.url.rstrip("/").rsplit("/", 1)[-1]


class NotifyingRateLimitRetryHandler(AsyncRateLimitErrorRetryHandler):
    """Calls `on_rate_limited(api_method, seconds)` for every 429 of a method in `RETRIED`,
    sleeps it out (capped) and retries, at most `max_retry_count` times."""

    def __init__(
        self, on_rate_limited: Callable[[str, float], None], max_retry_count: int = 2
    ) -> None:
        super().__init__(max_retry_count=max_retry_count)
        self.on_rate_limited = on_rate_limited
        self._warned: set[str] = set()  # methods whose absurd Retry-After was logged

    def retry_after(self, method: str, response: HttpResponse) -> float:
        return self.seconds(method, _header(response))

    def seconds(self, method: str, raw: str | None) -> float:
        """The capped wait for a `Retry-After` value, an absurd one logged once per method
        (also for the 429s the budgeted client reports)."""
        seconds, absurd = read_retry_after(raw)
        if absurd and method not in self._warned:
            self._warned.add(method)
            log.warning(
                "Slack answered %s with Retry-After %r; waiting %.0f s instead",
                method,
                raw,
                seconds,
            )
        return seconds

    async def can_retry_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        # Overrides the base class, which asks `_can_retry_async` only while retries are left:
        # the 429 of a call's last attempt must pause and teach the budget too.
        if error is not None or response is None or response.status_code != 429:
            return False
        method = _method(request)
        if method not in RETRIED:
            return False  # reported (with its channel) and retried by the budgeted client
        self.on_rate_limited(method, self.retry_after(method, response))
        return state.current_attempt < self.max_retry_count

    async def prepare_for_next_attempt_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> None:
        """slack_sdk's own sleep, with the capped Retry-After (it would `int()` the header)."""
        state.next_attempt_requested = True
        seconds = read_retry_after(_header(response))[0] if response is not None else 1.0
        await asyncio.sleep(seconds + random.random())  # noqa: S311 - jitter, as slack_sdk does
        state.increment_current_attempt()


def retry_handlers(on_rate_limited: Callable[[str, float], None]) -> list[AsyncRetryHandler]:
    """Connection errors, 500/503 and (as a last resort behind our own pacing) 429."""
    handlers: list[Any] = [
        AsyncConnectionErrorRetryHandler(max_retry_count=2),
        AsyncServerErrorRetryHandler(max_retry_count=2),
        NotifyingRateLimitRetryHandler(on_rate_limited),
    ]
    return handlers
