"""One MCP server, kept connected with the official `mcp` SDK's `Client`.

A supervisor task owns the connection (the SDK's transports are anyio context managers that
must be entered and left by one task): it connects, lists the tools, then re-lists them every
`check_every` seconds, which both notices a server that died and picks up tools it changed.
When the connection fails it waits (0.5 s doubling to 30 s) and tries again, forever: a server
that is down only withholds its own tools. A stdio server is a child process of the bot,
started here and stopped when the bot stops.

Stopping is anyio cancellation, not `Task.cancel()`: the SDK's transports tear down inside
shielded scopes (a stdio server's stdin is closed, then it is sent SIGTERM, then SIGKILL, each
wait bounded), and a native cancel both breaks through such a shield (abandoning the server
half-stopped, its stdout drain then waiting forever for a process nobody kills) and can be
swallowed once by `asyncio.wait_for` when its awaitable finishes at the same moment (the
supervisor then carries on as if never asked to stop). An anyio scope's cancel is level-
triggered: it is delivered again until the task leaves the scope, and it respects the shields.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.stdio import (
    FORCE_KILL_TIMEOUT,
    PROCESS_TERMINATION_TIMEOUT,
    StdioServerParameters,
    stdio_client,
)
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from bot.metrics import MCP_SERVER_UP
from bot.provenance import Source
from bot.tools.mcp.config import McpServerConfig
from bot.tools.mcp.failures import TimedOut, Unreachable, describe
from bot.tools.mcp.stderr import StderrToLog
from bot.tools.registry import ToolError

log = logging.getLogger(__name__)

MAX_PAGES = 20
MAX_LISTED = 1_000  # tools kept of one listing (a request carries at most 128 anyway)
# How long `close` waits for the supervisor: the SDK's stdio teardown is at most about 6.5 s
# (0.5 s to flush, 2 s for the server to exit on its own, 2 s after SIGTERM, 2 s to see the
# SIGKILL land); an HTTP connection's teardown is cancelled outright.
CLOSE_SECONDS = 8.0


class McpConnection:
    def __init__(
        self,
        name: str,
        config: McpServerConfig,
        *,
        check_every: float = 15.0,
    ) -> None:
        self.name = name
        self.config = config
        self.check_every = check_every
        self.definitions: list[types.Tool] = []  # the last listing, kept while down
        self.error: str | None = "not connected yet"
        self.connect_seconds: float | None = None  # start to first listing, last connection
        self._client: Client | None = None
        self._settled = asyncio.Event()  # the first attempt is over, either way
        self._broken = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stop: anyio.CancelScope | None = None  # cancelled by `close`; see the docstring
        self._http_status: int | None = None  # the last HTTP error of this attempt

    @property
    def up(self) -> bool:
        return self._client is not None

    def start(self) -> None:
        if self._task is None:
            self._stop = anyio.CancelScope()  # made in a running loop, as anyio requires
            self._task = asyncio.get_running_loop().create_task(
                self._supervise(), name=f"mcp-{self.name}"
            )

    async def settled(self, within: float) -> None:
        """Wait until the first attempt to connect ended (up or not), at most `within` s."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._settled.wait(), within)

    async def close(self) -> None:
        """Stop the supervisor and the server's connection, waiting at most `CLOSE_SECONDS`."""
        task, self._task = self._task, None
        if task is None:
            return
        if self._stop is not None:
            self._stop.cancel()
        if not task.done():
            await asyncio.wait({task}, timeout=CLOSE_SECONDS)  # never cancels `task` itself
        if not task.done():
            log.warning(
                "MCP server %s: its connection did not close within %g s; the bot stops "
                "without waiting for it",
                self.name,
                CLOSE_SECONDS,
            )
            task.cancel()  # last resort; not awaited, it may never end
            return
        with contextlib.suppress(asyncio.CancelledError):
            await task

    @contextlib.asynccontextmanager
    async def _open(self) -> AsyncIterator[Client]:
        timeout = self.config.timeout_seconds
        if self.config.command is not None:
            params = StdioServerParameters(
                command=self.config.command,
                args=self.config.args,
                env=self.config.env or None,
                cwd=self.config.cwd,
            )
            stderr = StderrToLog(self.name)  # never straight to the bot's stderr: redacted
            leaving: float | None = None
            try:
                async with Client(
                    stdio_client(params, errlog=stderr.file), read_timeout_seconds=timeout
                ) as client:
                    try:
                        yield client
                    finally:
                        leaving = time.perf_counter()
            finally:
                stderr.close()
                if leaving is not None:
                    self._say_if_forced(time.perf_counter() - leaving)
            return
        assert self.config.url is not None
        http = create_mcp_http_client(
            headers=self.config.headers or None,
            timeout=httpx2.Timeout(timeout, read=max(timeout, 300.0)),
        )

        async def remember(response: httpx2.Response) -> None:
            if response.status_code >= 400:
                self._http_status = response.status_code

        http.event_hooks = {"request": [], "response": [remember]}
        async with (
            http,
            Client(
                streamable_http_client(self.config.url, http_client=http),
                read_timeout_seconds=timeout,
            ) as client,
        ):
            yield client

    def _say_if_forced(self, seconds: float) -> None:
        """The SDK waits `PROCESS_TERMINATION_TIMEOUT` for a stdio server to exit once its
        stdin is closed, then sends SIGTERM and, `FORCE_KILL_TIMEOUT` later, SIGKILL to its
        process group: a teardown longer than the first wait means the server was stopped by
        force (it logs nothing itself unless even SIGKILL fails)."""
        if seconds > PROCESS_TERMINATION_TIMEOUT:
            forced = seconds > PROCESS_TERMINATION_TIMEOUT + FORCE_KILL_TIMEOUT
            how = "killed (it ignored SIGTERM)" if forced else "stopped with SIGTERM"
            log.warning(
                "MCP server %s did not exit within %g s of the bot closing its input, so it "
                "was %s; stopping it took %.1f s",
                self.name,
                PROCESS_TERMINATION_TIMEOUT,
                how,
                seconds,
            )

    async def _supervise(self) -> None:
        assert self._stop is not None
        with self._stop:
            await self._keep_connected()

    async def _keep_connected(self) -> None:
        delay = 0.5
        while True:
            started = time.perf_counter()
            self._http_status = None
            try:
                async with self._open() as client:
                    await asyncio.wait_for(self._list(client), self.config.timeout_seconds)
                    self.connect_seconds = time.perf_counter() - started
                    self._client, self.error, delay = client, None, 0.5
                    MCP_SERVER_UP.labels(server=self.name).set(1)
                    self._http_status = None  # a later failure is described afresh
                    log.info("MCP server %s is up with %d tools", self.name, len(self.definitions))
                    self._settled.set()
                    await self._watch(client)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # any failure of a server only withholds its tools
                self.error = describe(exc, self._http_status)
                log.warning("MCP server %s is unavailable: %s", self.name, self.error)
            finally:
                self._client = None
                MCP_SERVER_UP.labels(server=self.name).set(0)
            self._settled.set()
            await asyncio.sleep(delay)
            delay = min(delay * 2, 30.0)

    async def _watch(self, client: Client) -> None:
        while True:
            self._broken.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._broken.wait(), self.check_every)
            if self._broken.is_set():
                raise ConnectionError("a call found the connection closed")
            await asyncio.wait_for(self._list(client), self.config.timeout_seconds)

    async def _list(self, client: Client) -> list[types.Tool]:
        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page = await client.list_tools(cursor=cursor, cache_mode="refresh")
            tools.extend(page.tools[: MAX_LISTED - len(tools)])
            cursor = page.next_cursor
            if cursor is None or len(tools) >= MAX_LISTED:
                break
        self.definitions = tools
        return tools

    def _lost(self, exc: BaseException) -> Unreachable:
        self._broken.set()
        return Unreachable(
            f"the MCP server {self.name} is not reachable right now ({describe(exc)}); "
            "its tools are withheld until it is back"
        )

    def _client_or_raise(self) -> Client:
        if self._client is None:
            raise Unreachable(
                f"the MCP server {self.name} is not reachable right now"
                f"{f' ({self.error})' if self.error else ''}; its tools are withheld until "
                "it is back"
            )
        return self._client

    async def fresh_definitions(self) -> list[types.Tool]:
        """The server's tools as it describes them now (not the last listing)."""
        client = self._client_or_raise()
        try:
            return await asyncio.wait_for(self._list(client), self.config.timeout_seconds)
        except (MCPError, OSError, httpx2.TransportError, TimeoutError, ConnectionError) as exc:
            raise self._lost(exc) from None

    async def call(
        self, tool: str, arguments: dict[str, Any], meta: types.RequestParamsMeta | None
    ) -> types.CallToolResult:
        client = self._client_or_raise()
        try:
            return await client.call_tool(tool, arguments, meta=meta)
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED:
                raise self._lost(exc) from None
            if exc.code == types.REQUEST_TIMEOUT:
                raise TimedOut(
                    f"the MCP server {self.name} did not answer within "
                    f"{self.config.timeout_seconds:g} s; the call was sent and may have run "
                    "there (check before trying again)"
                ) from None
            raise ToolError(  # the server's words: data from it (`ToolError.source`)
                f"the MCP server {self.name} refused the call: {exc.message[:500]}",
                source=Source("tool", f"the {self.name} server"),
            ) from None
        except (OSError, httpx2.TransportError, ConnectionError) as exc:
            raise self._lost(exc) from None
