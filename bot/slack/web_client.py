"""The bot's one Slack Web API client: a single HTTP session for every call (without it
slack_sdk opens a session, and a TCP/TLS connection, per call: a handshake for each edit), and
every 429 reported to the workspace's budgets, which pause and learn from it."""

from __future__ import annotations

import logging

import aiohttp
from slack_sdk.web.async_client import AsyncWebClient

from bot.metrics import SLACK_RATELIMITED
from bot.slack.budgets import WorkspaceBudgets
from bot.slack.ratelimit import retry_handlers

log = logging.getLogger(__name__)


def web_client(token: str, api_url: str, budgets: WorkspaceBudgets) -> AsyncWebClient:
    def on_rate_limited(method: str, seconds: float) -> None:
        log.warning("Slack rate-limited %s for %.1fs", method, seconds)
        SLACK_RATELIMITED.labels(method=method).inc()
        budgets.rate_limited(method, seconds)

    http = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=100, keepalive_timeout=30),
        timeout=aiohttp.ClientTimeout(total=30),
    )
    return AsyncWebClient(
        token=token, base_url=api_url, session=http, retry_handlers=retry_handlers(on_rate_limited)
    )
