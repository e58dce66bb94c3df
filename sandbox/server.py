"""The sandbox's one HTTP server: Slack's Web API under /api/, Socket Mode at /socket-mode,
files under /files-pri/ (as Slack's file host), the page and its live updates under / and
/ui/, and the demo model under /demo-model/v1. Every route is behind the guard
(sandbox/guard.py): only the sandbox's own page and the bot it starts may drive it."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from sandbox import demo_model
from sandbox.files import FileRoutes
from sandbox.guard import Guard
from sandbox.socket_mode import SocketHub
from sandbox.ui import Ui
from sandbox.webapi import WebApi
from sandbox.workspace import Workspace

BODY_MAX = 24 * 1024 * 1024  # a shared file arrives as base64 in JSON (files.FILE_MAX)


@dataclass
class Sandbox:
    workspace: Workspace
    api: WebApi
    hub: SocketHub
    app: web.Application
    guard: Guard

    def address(self) -> str:
        """The page's address, key included (what the sandbox prints)."""
        return f"{self.workspace.base}/?key={self.guard.key}"


def build(guard: Guard | None = None, pace: float = demo_model.TOKEN_DELAY) -> Sandbox:
    guard = guard or Guard()
    workspace = Workspace()
    api = WebApi(workspace, guard)
    hub = SocketHub(workspace, guard)
    app = web.Application(client_max_size=BODY_MAX, middlewares=[guard.middleware])
    app.router.add_route("*", "/api/{method}", api.handle)
    app.router.add_get("/socket-mode", hub.handle)
    Ui(workspace, api, hub).routes(app)
    FileRoutes(workspace, guard).routes(app)
    demo_model.routes(app, pace)
    app.router.add_get("/healthz", _healthz)
    return Sandbox(workspace, api, hub, app, guard)


async def _healthz(_request: web.Request) -> web.Response:
    return web.Response(text="ok")


async def serve(sandbox: Sandbox, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Start serving; returns the runner and the port (given 0, the one the system picked)."""
    runner = web.AppRunner(sandbox.app, handle_signals=False, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = int(runner.addresses[0][1])
    sandbox.guard.bound_host = host
    shown = "127.0.0.1" if host in ("", "0.0.0.0", "::") else host  # noqa: S104
    shown = f"[{shown}]" if ":" in shown else shown
    sandbox.workspace.base = f"http://{shown}:{bound}"
    return runner, bound
