"""slack_sdk's own rate-limit retry handler, taught to tell the edit budget about a 429.

The handler sleeps for `Retry-After` and retries once; that freezes only the call that was
refused. Reporting the pause to the `EditBudget` makes every other reply hold its edits too,
instead of each of them running into the same 429.
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


class NotifyingRateLimitRetryHandler(AsyncRateLimitErrorRetryHandler):
    """Calls `on_rate_limited(api_method, seconds)` before sleeping out a 429."""

    def __init__(
        self, on_rate_limited: Callable[[str, float], None], max_retry_count: int = 2
    ) -> None:
        super().__init__(max_retry_count=max_retry_count)
        self.on_rate_limited = on_rate_limited

    async def prepare_for_next_attempt_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> None:
        if response is not None:
            method = request.url.rstrip("/").rsplit("/", 1)[-1]
            self.on_rate_limited(method, _retry_after(response))
        await super().prepare_for_next_attempt_async(
            state=state, request=request, response=response, error=error
        )


def retry_handlers(on_rate_limited: Callable[[str, float], None]) -> list[AsyncRetryHandler]:
    """Connection errors, 500/503 and (as a last resort behind our own pacing) 429."""
    handlers: list[Any] = [
        AsyncConnectionErrorRetryHandler(max_retry_count=2),
        AsyncServerErrorRetryHandler(max_retry_count=2),
        NotifyingRateLimitRetryHandler(on_rate_limited),
    ]
    return handlers
