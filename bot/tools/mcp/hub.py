"""Every configured MCP server as one `ToolSource` of the registry.

The model is offered the tools of the servers that are up; a server's tools are rebuilt when its
listing changes. `find` also answers for a server that is down (from its last listing, or a
placeholder if it was never seen) so a card keeps its server's approval policy and confirmation
and a click says plainly that the server is away.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from bot.tools.mcp.config import McpServerConfig
from bot.tools.mcp.connection import McpConnection
from bot.tools.mcp.tools import make_tool, unreachable_tool
from bot.tools.registry import Tool
from bot.tools.schema_arguments import usable

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServerStatus:
    name: str
    transport: str
    up: bool
    reads: int
    writes: int
    error: str | None
    connect_seconds: float | None

    @property
    def tools(self) -> int:
        return self.reads + self.writes


class McpHub:
    def __init__(self, servers: dict[str, McpServerConfig], *, check_every: float = 15.0) -> None:
        self.connections = {
            name: McpConnection(name, config, check_every=check_every)
            for name, config in servers.items()
        }
        self._built: dict[str, tuple[list[Any], dict[str, Tool[Any]]]] = {}

    async def start(self, wait: float = 10.0) -> None:
        """Start every server and wait (at most `wait` seconds) for each first answer, so the
        first conversation already sees the tools of the servers that are up."""
        for connection in self.connections.values():
            connection.start()
        await asyncio.gather(*(c.settled(wait) for c in self.connections.values()))

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self.connections.values()))

    def _tools(self, connection: McpConnection) -> dict[str, Tool[Any]]:
        """The server's tools by exposed name, from its last listing (cached per listing)."""
        definitions = connection.definitions
        cached = self._built.get(connection.name)
        if cached is not None and cached[0] is definitions:
            return cached[1]
        allowed = connection.config.allowed_tools
        tools: dict[str, Tool[Any]] = {}
        for definition in definitions:
            if allowed is not None and definition.name not in allowed:
                continue
            tool = make_tool(connection, definition)
            unfit = usable(tool.input_schema) if tool.input_schema is not None else None
            if unfit is not None:
                # One bad schema in a request makes the model's API refuse the whole request.
                log.warning(
                    "MCP server %s: tool %s is not offered: %s",
                    connection.name,
                    definition.name[:100],
                    unfit,
                )
                continue
            tools.setdefault(tool.name, tool)
        self._built[connection.name] = (definitions, tools)
        return tools

    def offered(self) -> list[Tool[Any]]:
        return [
            tool
            for connection in self.connections.values()
            if connection.up
            for tool in self._tools(connection).values()
        ]

    def find(self, name: str) -> Tool[Any] | None:
        server, separator, _ = name.partition("__")
        connection = self.connections.get(server) if separator else None
        if connection is None:
            return None
        known = self._tools(connection).get(name)
        if known is not None:
            return known
        return None if connection.up else unreachable_tool(connection, name)

    def notices(self) -> list[str]:
        return [
            f"The tool server {name} (MCP) is not reachable right now, so its tools are "
            "withheld. If the person asks for something it would do, tell them it is "
            "unavailable for the moment."
            for name, connection in self.connections.items()
            if not connection.up
        ]

    def status(self) -> list[ServerStatus]:
        rows = []
        for name, connection in self.connections.items():
            tools = self._tools(connection).values()
            reads = sum(1 for t in tools if not t.requires_approval)
            rows.append(
                ServerStatus(
                    name,
                    connection.config.transport,
                    connection.up,
                    reads,
                    len(tools) - reads,
                    connection.error,
                    connection.connect_seconds,
                )
            )
        return rows
