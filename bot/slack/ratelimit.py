"""slack_sdk's own rate-limit retry handler, taught to tell the workspace's budgets about a 429.

Every 429 is reported (method and `Retry-After`): the budget of that method pauses and learns
a lower rate, so the other replies hold their calls instead of each running into the same 429.
The handler then sleeps out `Retry-After` and retries, which freezes the call that was refused:
a last resort for methods we do not pace. For the streaming methods we pace ourselves it does
not retry: the refusal returns at once, so a reply whose append was refused can still close its
stream with its final text instead of sitting out a minute inside one call.
"""

from __future__ import annotations

from collections.abc import Callable
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
    for name, values in response.headers.items():
        if name.lower() == "retry-after" and values:
            try:
                return float(values[0])
            except ValueError:
                break
    return 1.0


# Paced by us; a refused call returns at once and the reply decides what next (a start that
# is refused means edits, a stop that is refused means the rest goes on in a new message).
NOT_RETRIED = frozenset({"chat.appendStream", "chat.startStream", "chat.stopStream"})


def _method(request: HttpRequest) -> str:
    return request.url.rstrip("/").rsplit("/", 1)[-1]


class NotifyingRateLimitRetryHandler(AsyncRateLimitErrorRetryHandler):
    """Calls `on_rate_limited(api_method, seconds)` for every 429; sleeps it out and retries
    only methods not in `NOT_RETRIED`."""

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
        self.on_rate_limited(method, _retry_after(response))
        return method not in NOT_RETRIED


def retry_handlers(on_rate_limited: Callable[[str, float], None]) -> list[AsyncRetryHandler]:
    """Connection errors, 500/503 and (as a last resort behind our own pacing) 429."""
    handlers: list[Any] = [
        AsyncConnectionErrorRetryHandler(max_retry_count=2),
        AsyncServerErrorRetryHandler(max_retry_count=2),
        NotifyingRateLimitRetryHandler(on_rate_limited),
    ]
    return handlers
