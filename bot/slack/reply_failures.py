"""How a live reply's pump (edits, native stream or parts) meets a Slack call that failed: a
failure for good ends the pump; a 429 still refused after the SDK's own retry is tried again;
a 5xx or a broken connection is tried again after a back-off, up to `MAX_FAILURES` in a row
(then the sweeper finishes the reply from its journal)."""

from __future__ import annotations

import asyncio

from slack_sdk.errors import SlackApiError

from bot.errors import retryable, slack_error

MAX_FAILURES = 4  # transient failures in a row before a reply stops updating
# After the n-th transient failure in a row a reply waits BACKOFF_SECONDS * 2**n (at most 8 s):
# 1, 2, 4, 8 s, about a quarter of a minute of outage before the sweeper takes over.
BACKOFF_SECONDS = 0.5


def reason(exc: BaseException) -> str:
    """What the log says a pump stopped for (Slack's error code, never the payload)."""
    return slack_error(exc) if isinstance(exc, SlackApiError) else type(exc).__name__


class Failures:
    """The transient failures in a row of one reply's Slack calls."""

    def __init__(self, rate_limited_wait: float = 0.0) -> None:
        self.in_a_row = 0
        self.rate_limited_wait = rate_limited_wait

    def succeeded(self) -> None:
        self.in_a_row = 0

    async def failed(self, exc: Exception) -> None:
        """Wait before the next try; raises `exc` again if it is for good (not retryable, or
        one failure too many in a row)."""
        if not retryable(exc):
            raise exc
        if isinstance(exc, SlackApiError) and slack_error(exc) == "ratelimited":
            await asyncio.sleep(self.rate_limited_wait)
            return
        self.in_a_row += 1
        if self.in_a_row > MAX_FAILURES:
            raise exc
        await asyncio.sleep(min(8.0, BACKOFF_SECONDS * 2**self.in_a_row))
