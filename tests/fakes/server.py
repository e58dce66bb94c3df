"""Run an aiohttp application on 127.0.0.1:<free port> in a thread of its own.

The fakes live on their own event loop so that the bot under test (on the test's loop) and the
fake never share a scheduler: a slow fake cannot hide a blocked bot, and vice versa.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

from aiohttp import web

T = TypeVar("T")


class ThreadedServer:
    def __init__(self, app: web.Application) -> None:
        self._app = app
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ThreadedServer:
        self._thread.start()
        self.port = self.call(self._start())
        return self

    async def _start(self) -> int:
        self._runner = web.AppRunner(self._app, handle_signals=False, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        return int(self._runner.addresses[0][1])

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return future.result(timeout=30)

    def stop(self) -> None:
        if self._runner is not None:
            self.call(self._runner.cleanup())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        self.loop.close()
