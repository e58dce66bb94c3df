"""slack_sdk's own rate-limit retry handler, taught to tell the workspace's budgets about a 429
of `chat.update`.

A `chat.update` 429 is reported (`Retry-After`): the edit budget pauses and learns a lower rate,
so the other replies hold their edits instead of each running into the same 429. The handler
then sleeps out `Retry-After` and retries the edit. Every other method's 429 comes back to the
budgeted client (`bot/slack/web_client.py`), which reports it with the call's channel and
retries through the method's budget (the streaming methods and cosmetic calls not at all: a
reply whose append was refused can still close its stream with its final text instead of
sitting out a minute inside one call).
"""

from __future__ import annotations

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


def _retry_after(response: HttpResponse) -> float:
    return retry_after(response.headers)


def retry_after(headers: Mapping[str, Any]) -> float:
    """Seconds Slack asked to wait (1 if it did not say)."""
    for name, values in headers.items():
        value = values[0] if isinstance(values, list) and values else values
        if name.lower() == "retry-after" and value:
            try:
                return float(value)
            except (TypeError, ValueError):
                break
    return 1.0


# Retried here; every other method's 429 is the budgeted client's.
RETRIED = frozenset({"chat.update"})


def _method(request: HttpRequest) -> str:
    return request.url.rstrip("/").rsplit("/", 1)[-1]


class NotifyingRateLimitRetryHandler(AsyncRateLimitErrorRetryHandler):
    """Calls `on_rate_limited(api_method, seconds)` for a 429 of a method in `RETRIED`, sleeps
    it out and retries."""

    def __init__(
        self, on_rate_limited: Callable[[str, float], None], max_retry_count: int = 2
    ) -> None:
        super().__init__(max_retry_count=max_retry_count)
        self.on_rate_limited = on_rate_limited

    async def _can_retry_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        if response is None or response.status_code != 429:
            return False
        method = _method(request)
        if method not in RETRIED:
            return False
        self.on_rate_limited(method, _retry_after(response))
        return True


def retry_handlers(on_rate_limited: Callable[[str, float], None]) -> list[AsyncRetryHandler]:
    """Connection errors, 500/503 and (as a last resort behind our own pacing) 429."""
    handlers: list[Any] = [
        AsyncConnectionErrorRetryHandler(max_retry_count=2),
        AsyncServerErrorRetryHandler(max_retry_count=2),
        NotifyingRateLimitRetryHandler(on_rate_limited),
    ]
    return handlers
