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

from aiohttp import web
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.adapter.socket_mode.async_internals import run_async_bolt_app, send_async_response
from slack_bolt.response import BoltResponse
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse

from bot.app import Countersign
from bot.front_door import EVENTS_PATH, FrontDoor, health, metrics

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
    await web.TCPSite(runner, settings.metrics_host, settings.metrics_port).start()
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
    await countersign.start()
    door = FrontDoor(countersign, host, port)
    bound = await door.start()
    operator_port = await serve_operator_port(countersign)
    log.info("HTTP mode: listening on http://%s:%s%s", host, bound, EVENTS_PATH)
    if started is not None:
        started.set_result(bound)
    if own_stop:
        _stop_on_signals(stop)
    try:
        await stop.wait()
    finally:
        await countersign.shutdown()
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
    await countersign.start()
    handler = AcknowledgingHandler(countersign.bolt, token.get_secret_value())
    metrics_runner = await serve_operator_port(countersign)
    if own_stop:
        _stop_on_signals(stop)
    await handler.connect_async()  # type: ignore[no-untyped-call]
    log.info("Socket Mode: connected")
    try:
        await stop.wait()
    finally:
        await handler.close_async()  # type: ignore[no-untyped-call]
        await countersign.shutdown()
        if metrics_runner is not None:
            await metrics_runner.cleanup()
