"""The sandbox's one HTTP server: Slack's Web API under /api/, Socket Mode at /socket-mode,
the page and its live updates under / and /ui/, and the demo model under /demo-model/v1."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from sandbox import demo_model
from sandbox.socket_mode import SocketHub
from sandbox.ui import Ui
from sandbox.webapi import WebApi
from sandbox.workspace import Workspace


@dataclass
class Sandbox:
    workspace: Workspace
    api: WebApi
    hub: SocketHub
    app: web.Application


def build() -> Sandbox:
    workspace = Workspace()
    api = WebApi(workspace)
    hub = SocketHub(workspace)
    app = web.Application(client_max_size=4 * 1024 * 1024)
    app.router.add_route("*", "/api/{method}", api.handle)
    app.router.add_get("/socket-mode", hub.handle)
    Ui(workspace, api, hub).routes(app)
    demo_model.routes(app)
    app.router.add_get("/healthz", _healthz)
    return Sandbox(workspace, api, hub, app)


async def _healthz(_request: web.Request) -> web.Response:
    return web.Response(text="ok")


async def serve(sandbox: Sandbox, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Start serving; returns the runner and the port (given 0, the one the system picked)."""
    runner = web.AppRunner(sandbox.app, handle_signals=False, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    return runner, int(runner.addresses[0][1])
