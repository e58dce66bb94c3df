"""The bot's one Slack Web API client: a single HTTP session for every call (without it
slack_sdk opens a session, and a TCP/TLS connection, per call: a handshake for each edit), every
call under its method's budget (`bot/slack/call_budgets.py`) before it is sent, and every 429
reported to the workspace's budgets, which pause and learn from it.

A call whose budget is spent and that is not made raises `CallSkipped`: a `SlackApiError` whose
error is `budget_spent`, so every caller already handles it as it handles Slack's refusals (a
status or a title is left as it was, a journal tries again later)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot.errors import slack_error
from bot.metrics import SLACK_RATELIMITED
from bot.slack.budgets import WorkspaceBudgets
from bot.slack.call_budgets import BUDGET_SPENT, Spent
from bot.slack.method_limits import limit_of
from bot.slack.ratelimit import (
    RETRIED,
    NotifyingRateLimitRetryHandler,
    header,
    read_retry_after,
    retry_handlers,
)

log = logging.getLogger(__name__)

RETRIES_AFTER_429 = 2  # through the method's budget, which the 429 paused for Retry-After


class CallSkipped(SlackApiError):
    """The call was not made: its method's budget was spent (see the module's doc)."""

    def __init__(self, message: str, response: AsyncSlackResponse) -> None:
        super().__init__(message, response)  # type: ignore[no-untyped-call]


def _channel(*sources: Any) -> str | None:
    for source in sources:
        if isinstance(source, dict) and source.get("channel"):
            return str(source["channel"])
    return None


class BudgetedWebClient(AsyncWebClient):
    """`AsyncWebClient` whose `api_call` (every method's one way out) takes a slot in the
    method's budget first."""

    def __init__(
        self, *, budgets: WorkspaceBudgets, root: BudgetedWebClient | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.budgets = budgets
        self._root = root or self
        self._identity: asyncio.Task[AsyncSlackResponse] | None = None

    def for_team(self, team_id: str | None) -> BudgetedWebClient:
        """A client for one request (bolt's `client`), under the same budgets."""
        return BudgetedWebClient(
            budgets=self.budgets,
            root=self._root,
            token=self.token,
            base_url=self.base_url,
            timeout=self.timeout,
            session=self.session,
            headers=dict(self.headers),
            team_id=team_id,
            logger=self.logger,
            retry_handlers=list(self.retry_handlers),
        )

    async def auth_test(self, **kwargs: Any) -> AsyncSlackResponse:
        """One `auth.test` for the process, shared by everyone who asks (the token's identity
        does not change while it runs): bolt asks it for every request until its own first
        answer is stored (60 events at once asked it 61 times, and a request that came just
        after the answer asked again). A failed one is asked again by the next caller."""
        root = self._root
        identity = root._identity
        if identity is None or (
            identity.done() and (identity.cancelled() or identity.exception() is not None)
        ):
            identity = root._identity = asyncio.ensure_future(super().auth_test(**kwargs))
        return await asyncio.shield(identity)

    def _retry_after(self, method: str, raw: str | None) -> float:
        """Capped, and logged once per method when absurd (by the 429 handler, which knows
        which methods it warned about)."""
        for handler in self.retry_handlers:
            if isinstance(handler, NotifyingRateLimitRetryHandler):
                return handler.seconds(method, raw)
        return read_retry_after(raw)[0]

    def _rate_limited(self, method: str, seconds: float, channel: str | None) -> None:
        log.warning("Slack rate-limited %s for %.1fs", method, seconds)
        SLACK_RATELIMITED.labels(method=method).inc()
        if channel is None:
            self.budgets.rate_limited(method, seconds)
        else:
            self.budgets.rate_limited(method, seconds, channel)

    def _skipped(self, method: str, spent: Spent) -> CallSkipped:
        response = AsyncSlackResponse(
            client=self,
            http_verb="POST",
            api_url=f"{self.base_url}{method}",
            req_args={},
            data={"ok": False, "error": BUDGET_SPENT},
            headers={},
            status_code=429,
        )
        log.info("Slack call not made: %s", spent)
        return CallSkipped(f"The request to the Slack API was not made: {spent}", response)

    async def api_call(self, api_method: str, **kwargs: Any) -> AsyncSlackResponse:
        channel = _channel(kwargs.get("json"), kwargs.get("data"), kwargs.get("params"))
        limit = limit_of(api_method)
        retries = 0 if limit is None or limit.cosmetic else RETRIES_AFTER_429
        while True:
            try:
                await self.budgets.calls.admit(api_method, channel)
            except Spent as spent:
                raise self._skipped(api_method, spent) from None
            try:
                response: AsyncSlackResponse = await super().api_call(api_method, **kwargs)
                return response
            except SlackApiError as exc:
                if exc.response.status_code != 429 or api_method in RETRIED:
                    raise  # chat.update's 429s are reported (and retried) by its handler
                seconds = self._retry_after(api_method, header(exc.response.headers))
                per_channel = limit is not None and limit.per_channel is not None
                self._rate_limited(api_method, seconds, channel if per_channel else None)
                if retries <= 0 or slack_error(exc) != "ratelimited":
                    raise
                retries -= 1


def web_client(token: str, api_url: str, budgets: WorkspaceBudgets) -> AsyncWebClient:
    def on_rate_limited(method: str, seconds: float) -> None:
        log.warning("Slack rate-limited %s for %.1fs", method, seconds)
        SLACK_RATELIMITED.labels(method=method).inc()
        budgets.rate_limited(method, seconds)

    http = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=100, keepalive_timeout=30),
        timeout=aiohttp.ClientTimeout(total=30),
    )
    return BudgetedWebClient(
        budgets=budgets,
        token=token,
        base_url=api_url,
        session=http,
        retry_handlers=retry_handlers(on_rate_limited),
    )
