"""HTTP mode's front door: Slack's requests are verified and acknowledged on a thread of their
own, so an acknowledgement never queues behind the work of the main event loop.

Under load the main loop is busy (200 replies streaming are thousands of model chunks a second
to parse), and a request waiting for it waited too: `bench/load.py` measured acknowledgements at
p99 213 ms on one process while the handler itself took under 100 ms. Here a small event loop on
its own thread reads the request, checks Slack's signature and answers; the work goes to the
main loop. Requests whose answer carries the work's result (a modal submission's validation
errors, the URL check, anything unfamiliar) wait for the main loop as before; events, button
clicks and slash commands are answered at once, as their listeners only acknowledge and hand on.
"""

from __future__ import annotations

import asyncio
import hmac
import html
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.signature import SignatureVerifier
from sqlalchemy import text

from bot.app import Countersign
from bot.db.models import Task
from bot.metrics import SLACK_ACK, exposition

log = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"
T = TypeVar("T")
# Payload types whose listeners only acknowledge and hand the work to a task: the answer does
# not depend on the work, so it is sent without waiting for the main loop.
ANSWERED_AT_ONCE = frozenset({"event_callback", "block_actions"})
# Without a sign of life from the main loop for this long, Slack's requests are refused (503)
# rather than acknowledged: several times the worst collector pause and loop lag measured
# under load (400 and 250 ms).
STALLED_SECONDS = 2.5


async def metrics(_request: web.Request) -> web.Response:
    body, content_type = exposition()
    return web.Response(body=body, headers={"Content-Type": content_type})


def operator_check(token: str | None) -> Callable[[web.Request], bool]:
    """Whether a request on the public port carries the operator's `METRICS_TOKEN` (as
    `Authorization: Bearer …`). Without a configured token nobody on the public port is one:
    metrics and health details are then served only on `METRICS_PORT` (loopback by default)."""

    def is_operator(request: web.Request) -> bool:
        given = request.headers.get("Authorization", "")
        return token is not None and hmac.compare_digest(given.encode(), f"Bearer {token}".encode())

    return is_operator


def kind_of(body: str) -> str:
    if body.startswith("{"):
        return "event"
    return "interaction" if body.startswith("payload=") else "command"


def answered_at_once(request: AsyncBoltRequest) -> bool:
    payload = request.body
    if "command" in payload and "response_url" in payload:
        return True  # a slash command: acknowledged empty, answered through response_url
    return payload.get("type") in ANSWERED_AT_ONCE


def http_app(countersign: Countersign, main: asyncio.AbstractEventLoop) -> web.Application:
    """The routes, for a loop other than `main`: work runs on `main`, answers are sent here."""
    secret = countersign.settings.slack_signing_secret
    verifier = SignatureVerifier(secret.get_secret_value() if secret else "")

    def on_main(coro: Coroutine[Any, Any, T]) -> Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, main)

    def waited(coro: Coroutine[Any, Any, T]) -> Awaitable[T]:
        return asyncio.wrap_future(on_main(coro))

    def report(done: Future[Any]) -> None:
        if not done.cancelled() and done.exception() is not None:
            log.error("handling a Slack request failed", exc_info=done.exception())

    async def slack_events(request: web.Request) -> web.Response:
        if not countersign.tasks.accepting:
            # Shutting down: refuse rather than acknowledge work we would then drop; Slack
            # delivers the event again (to another replica, or to us after the restart).
            return web.Response(status=503, text="shutting down")
        if countersign.heartbeat.silent_for() > STALLED_SECONDS:
            # The main loop has not run for seconds: an acknowledgement now would promise work
            # nobody may do. Slack delivers the request again (to a replica, or to us later).
            log.warning("main loop stalled: a Slack request was refused with 503")
            return web.Response(status=503, text="busy")
        arrived = time.perf_counter()
        try:
            body = (await request.read()).decode("utf-8")
        except UnicodeDecodeError:
            return web.Response(status=400, text="the body is not UTF-8 text")
        if not verifier.is_valid_request(body, dict(request.headers)):
            return web.Response(status=401, text="invalid signature")
        try:
            bolt_request = AsyncBoltRequest(
                body=body,
                query=request.query_string,
                headers=request.headers,  # type: ignore[arg-type]
            )
            at_once = answered_at_once(bolt_request)
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            # Signed, but not in a shape Bolt can read: answer, change nothing.
            log.warning("unreadable request refused: %s", type(exc).__name__)
            return web.Response(status=400, text="unreadable request")
        if at_once:
            on_main(countersign.bolt.async_dispatch(bolt_request)).add_done_callback(report)
            answer = web.Response(status=200)
        else:
            bolt_response = await waited(countersign.bolt.async_dispatch(bolt_request))
            answer = await to_aiohttp_response(bolt_response)
        SLACK_ACK.labels(kind=kind_of(body)).observe(time.perf_counter() - arrived)
        return answer

    token = countersign.settings.metrics_token
    is_operator = operator_check(token.get_secret_value() if token else None)

    async def healthz(request: web.Request) -> web.Response:
        """Anyone may learn whether the bot is up (load balancers ask); only an operator
        reads what it is doing."""
        return await waited(health(countersign, detailed=is_operator(request)))

    async def guarded_metrics(request: web.Request) -> web.Response:
        if not is_operator(request):
            raise web.HTTPNotFound() if token is None else web.HTTPUnauthorized()
        return await metrics(request)

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
        page = await waited(_task_page(countersign, int(raw_id), team))
        if page is None:
            raise web.HTTPNotFound()
        return web.Response(text=page, content_type="text/html")

    application = web.Application()
    application.router.add_post(EVENTS_PATH, slack_events)
    application.router.add_get("/healthz", healthz)
    application.router.add_get("/metrics", guarded_metrics)
    if countersign.links is not None:
        application.router.add_get("/tasks/{task_id}", task_page)
    return application


async def health(countersign: Countersign, detailed: bool) -> web.Response:
    try:
        async with asyncio.timeout(2):
            async with countersign.db.engine.connect() as connection:
                await connection.execute(text("SELECT 1"))
    except Exception as exc:  # any database failure makes us unhealthy
        log.warning("health check failed: %s", type(exc).__name__)
        details: dict[str, object] = {"database": "unreachable"} if detailed else {}
        return web.json_response({"ok": False, **details}, status=503)
    found: dict[str, object] = {"replies_in_flight": countersign.tasks.running}
    details = found if detailed else {}
    return web.json_response({"ok": True, **details})


async def _task_page(countersign: Countersign, task_id: int, team: str) -> str | None:
    async with countersign.db.transaction() as session:
        task = await session.get(Task, task_id)
    if task is None or task.team_id != team:
        return None
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
    return (
        f"<!doctype html><title>TASK-{task.id}</title><h1>TASK-{task.id}: "
        f"{html.escape(task.title)}</h1><table>{rows}</table>"
    )


class FrontDoor:
    """The HTTP server on its own thread and event loop, started and stopped from the main loop."""

    def __init__(self, countersign: Countersign, host: str, port: int) -> None:
        self.countersign = countersign
        self.host, self.port = host, port
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="front-door")
        self._runner: web.AppRunner | None = None

    async def start(self) -> int:
        """Listen; returns the bound port."""
        self._thread.start()
        main = asyncio.get_running_loop()
        return await self._call(self._open(main))

    async def _open(self, main: asyncio.AbstractEventLoop) -> int:
        self._runner = web.AppRunner(http_app(self.countersign, main), handle_signals=False)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port).start()
        addresses = self._runner.addresses
        return int(addresses[0][1]) if addresses else self.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._call(self._runner.cleanup())
        self._loop.call_soon_threadsafe(self._loop.stop)
        await asyncio.to_thread(self._thread.join, 10)
        self._loop.close()

    def _call(self, coro: Coroutine[Any, Any, T]) -> Awaitable[T]:
        return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))
