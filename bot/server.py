"""Runtimes: HTTP mode (aiohttp: `POST /slack/events`, `GET /healthz`) and Socket Mode.

Both stop cleanly on SIGTERM/SIGINT: no new events, live replies finish or are finalised.
"""

from __future__ import annotations

import asyncio
import html
import logging
import signal
import time

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_sdk.signature import SignatureVerifier
from sqlalchemy import text

from bot.app import Countersign
from bot.db.models import Task
from bot.metrics import SLACK_ACK, exposition

log = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"


async def metrics(_request: web.Request) -> web.Response:
    body, content_type = exposition()
    return web.Response(body=body, headers={"Content-Type": content_type})


def http_app(countersign: Countersign) -> web.Application:
    secret = countersign.settings.slack_signing_secret
    verifier = SignatureVerifier(secret.get_secret_value() if secret else "")

    async def slack_events(request: web.Request) -> web.Response:
        if not countersign.tasks.accepting:
            # Shutting down: refuse rather than acknowledge work we would then drop; Slack
            # delivers the event again (to another replica, or to us after the restart).
            return web.Response(status=503, text="shutting down")
        arrived = time.perf_counter()
        body = await request.text()
        if not verifier.is_valid_request(body, dict(request.headers)):
            return web.Response(status=401, text="invalid signature")
        try:
            bolt_request = await to_bolt_request(request)
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            # Signed, but not in a shape Bolt can read: answer, change nothing.
            log.warning("unreadable request refused: %s", type(exc).__name__)
            return web.Response(status=400, text="unreadable request")
        answer = await to_aiohttp_response(await countersign.bolt.async_dispatch(bolt_request))
        SLACK_ACK.labels(kind=_kind(body)).observe(time.perf_counter() - arrived)
        return answer

    async def healthz(_request: web.Request) -> web.Response:
        try:
            async with asyncio.timeout(2):
                async with countersign.db.engine.connect() as connection:
                    await connection.execute(text("SELECT 1"))
        except Exception as exc:  # any database failure makes us unhealthy
            log.warning("health check failed: %s", exc)
            return web.json_response({"ok": False, "database": "unreachable"}, status=503)
        return web.json_response({"ok": True, "replies_in_flight": countersign.tasks.running})

    async def task_page(request: web.Request) -> web.Response:
        """Where a task's link on a card leads (read-only). Only a signed link this bot made
        for the task's workspace, before it expired, opens it; anything else is a 404."""
        links = countersign.links
        raw_id = request.match_info["task_id"]
        team = request.query.get("team", "")
        if links is None or not raw_id.isdigit() or len(raw_id) > 18:
            raise web.HTTPNotFound()
        if not links.verify(
            f"/tasks/{raw_id}", team, request.query.get("expires", ""), request.query.get("sig", "")
        ):
            raise web.HTTPNotFound()
        async with countersign.db.transaction() as session:
            task = await session.get(Task, int(raw_id))
        if task is None or task.team_id != team:
            raise web.HTTPNotFound()
        rows = "".join(
            f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v or ''))}</td></tr>"
            for k, v in [
                ("status", task.status),
                ("assignee", task.assignee),
                ("due", task.due_date),
                ("priority", task.priority),
                ("description", task.description),
            ]
        )
        page = (
            f"<!doctype html><title>TASK-{task.id}</title><h1>TASK-{task.id}: "
            f"{html.escape(task.title)}</h1><table>{rows}</table>"
        )
        return web.Response(text=page, content_type="text/html")

    application = web.Application()
    application.router.add_post(EVENTS_PATH, slack_events)
    application.router.add_get("/healthz", healthz)
    application.router.add_get("/metrics", metrics)
    if countersign.links is not None:
        application.router.add_get("/tasks/{task_id}", task_page)
    return application


def _kind(body: str) -> str:
    if body.startswith("{"):
        return "event"
    return "interaction" if body.startswith("payload=") else "command"


async def serve_metrics(host: str, port: int) -> web.AppRunner:
    """Socket Mode has no HTTP server of its own: `/metrics` on a port of its own."""
    application = web.Application()
    application.router.add_get("/metrics", metrics)
    runner = web.AppRunner(application, handle_signals=False)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    log.info("metrics on http://%s:%s/metrics", host, port)
    return runner


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
    runner = web.AppRunner(http_app(countersign), handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = runner.addresses[0][1] if runner.addresses else port
    log.info("HTTP mode: listening on http://%s:%s%s", host, bound, EVENTS_PATH)
    if started is not None:
        started.set_result(int(bound))
    if own_stop:
        _stop_on_signals(stop)
    try:
        await stop.wait()
    finally:
        await countersign.shutdown()
        await runner.cleanup()


async def run_socket_mode(countersign: Countersign, stop: asyncio.Event | None = None) -> None:
    """Socket Mode: Slack pushes events over a WebSocket opened with `apps.connections.open`
    on the configured Slack API URL (the handler reuses the app's Web API client)."""
    token = countersign.settings.slack_app_token
    assert token is not None
    own_stop = stop is None
    stop = stop or asyncio.Event()
    await countersign.start()
    handler = AsyncSocketModeHandler(countersign.bolt, token.get_secret_value())
    port = countersign.settings.metrics_port
    metrics_runner = await serve_metrics("0.0.0.0", port) if port is not None else None  # noqa: S104
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
