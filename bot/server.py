"""Runtimes: HTTP mode (the front door: `POST /slack/events`, `GET /healthz`, `GET /metrics`)
and Socket Mode.

Both stop cleanly on SIGTERM/SIGINT: no new events, live replies finish or are finalised.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from typing import Any

import aiohttp
from aiohttp import web
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.adapter.socket_mode.async_internals import run_async_bolt_app, send_async_response
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse

from bot.app import Countersign
from bot.front_door import EVENTS_PATH, FrontDoor, health, metrics
from bot.startup import StartupError, listening, reason

log = logging.getLogger(__name__)

__all__ = ["EVENTS_PATH", "run_socket_mode", "serve_http", "serve_operator_port"]


async def serve_operator_port(countersign: Countersign) -> web.AppRunner | None:
    """`GET /metrics` and a detailed `GET /healthz` on `METRICS_PORT`, bound to `METRICS_HOST`
    (loopback unless the operator says otherwise), in either mode; None without a port."""
    settings = countersign.settings
    if settings.metrics_port is None:
        return None
    application = web.Application()
    application.router.add_get("/metrics", metrics)

    async def healthz(_request: web.Request) -> web.Response:
        return await health(countersign, detailed=True)

    application.router.add_get("/healthz", healthz)
    runner = web.AppRunner(application, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, settings.metrics_host, settings.metrics_port)
    try:
        await listening(
            site.start(),
            settings.metrics_host,
            settings.metrics_port,
            "METRICS_PORT",
            "METRICS_HOST",
        )
    except StartupError:
        await runner.cleanup()
        raise
    log.info("metrics on http://%s:%s/metrics", settings.metrics_host, settings.metrics_port)
    return runner


class AcknowledgingHandler(AsyncSocketModeHandler):
    """Bolt's handler acknowledges an envelope only when a listener answered it with 200, and
    Slack's SDK drops an envelope whose payload is not an object without a word: Slack then
    delivers it again and again. Here every envelope is acknowledged, whatever it holds; what
    no listener wanted (an unknown action id, a view nobody opened, junk) changes nothing."""

    def __init__(self, app: Any, app_token: str) -> None:
        super().__init__(app, app_token)
        self.client.message_listeners.append(self._acknowledge_unreadable)

    async def handle(self, client: SocketModeClient, req: SocketModeRequest) -> None:  # type: ignore[override]
        started = time.time()
        try:
            response: BoltResponse = await run_async_bolt_app(self.app, req)
        except Exception as exc:  # a payload Bolt could not read: acknowledge, change nothing
            log.warning("unreadable Socket Mode envelope acknowledged: %s", type(exc).__name__)
            response = BoltResponse(status=200, body="")
        if response.status != 200:
            log.info("Socket Mode envelope no listener took (%s) acknowledged", response.status)
            response = BoltResponse(status=200, body="")
        await send_async_response(client, req, response, started)

    @staticmethod
    async def _acknowledge_unreadable(
        client: AsyncBaseSocketModeClient, message: dict[Any, Any], _raw: str | None
    ) -> None:
        """An envelope whose payload is missing or not an object never reaches `handle`."""
        envelope_id = message.get("envelope_id")
        if not isinstance(envelope_id, str) or isinstance(message.get("payload"), dict | str):
            return
        log.warning("Socket Mode envelope without a readable payload acknowledged")
        await client.send_socket_mode_response(SocketModeResponse(envelope_id=envelope_id))


async def connect_to_slack(handler: AcknowledgingHandler, api_url: str) -> None:
    """Open the Socket Mode connection; Slack's refusal or silence is a `StartupError`. The
    SDK retries a failed first connection forever, logging a traceback each time, which suits
    a dropped connection later but not a revoked token or a wrong SLACK_API_URL at start: the
    first WebSocket address is asked for here, once, and handed to the SDK."""
    client = handler.client
    try:
        opened = await client.web_client.apps_connections_open(app_token=client.app_token)
    except SlackApiError as exc:
        error = exc.response.get("error") if exc.response is not None else None
        raise StartupError(
            f"Slack refused the Socket Mode connection ({error or 'no reason given'}): check "
            "SLACK_APP_TOKEN (an app-level xapp- token with the connections:write scope)"
        ) from None
    except (aiohttp.ClientError, OSError) as exc:
        raise StartupError(
            f"cannot reach Slack at {api_url} ({reason(exc)}): check SLACK_API_URL and the network"
        ) from None
    client.wss_uri = opened.get("url")
    await handler.connect_async()  # type: ignore[no-untyped-call]


def _stop_on_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)


async def serve_http(
    countersign: Countersign,
    host: str,
    port: int,
    stop: asyncio.Event | None = None,
    started: asyncio.Future[int] | None = None,
) -> None:
    """Serve until `stop` is set (or a signal arrives); `started` receives the bound port."""
    countersign.settings.require_http_mode()
    own_stop = stop is None
    stop = stop or asyncio.Event()
    door: FrontDoor | None = None
    operator_port: web.AppRunner | None = None
    try:
        await countersign.start()
        door = FrontDoor(countersign, host, port)
        bound = await listening(door.start(), host, port, "--port", "--host")
        operator_port = await serve_operator_port(countersign)
        log.info("HTTP mode: listening on http://%s:%s%s", host, bound, EVENTS_PATH)
        if started is not None:
            started.set_result(bound)
        if own_stop:
            _stop_on_signals(stop)
        await countersign.settle()
        await stop.wait()
    except Exception as exc:
        if started is not None and not started.done():  # whoever waits for the port learns why
            started.set_exception(exc)
        raise
    finally:
        await countersign.shutdown()
        if door is not None:
            await door.stop()
        if operator_port is not None:
            await operator_port.cleanup()


async def run_socket_mode(countersign: Countersign, stop: asyncio.Event | None = None) -> None:
    """Socket Mode: Slack pushes events over a WebSocket opened with `apps.connections.open`
    on the configured Slack API URL (the handler reuses the app's Web API client)."""
    token = countersign.settings.slack_app_token
    assert token is not None
    own_stop = stop is None
    stop = stop or asyncio.Event()
    handler = AcknowledgingHandler(countersign.bolt, token.get_secret_value())
    metrics_runner: web.AppRunner | None = None
    try:
        await countersign.start()
        metrics_runner = await serve_operator_port(countersign)
        if own_stop:
            _stop_on_signals(stop)
        log.info("connecting to Slack (Socket Mode)…")
        await connect_to_slack(handler, str(countersign.settings.slack_api_url))
        log.info("Socket Mode: connected; ready")
        await countersign.settle()
        await stop.wait()
    finally:
        await handler.close_async()  # type: ignore[no-untyped-call]
        await countersign.shutdown()
        if metrics_runner is not None:
            await metrics_runner.cleanup()
