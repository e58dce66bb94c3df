"""The outside tools turned on by settings: the `github` pack (`GITHUB_TOKEN`), the `linear`
pack (`LINEAR_API_KEY`) and every MCP server in `MCP_SERVERS`. Built once, started with the bot
(stdio MCP servers are its child processes) and closed with it. Each is imported only when
configured: the MCP SDK alone is about a third of the bot's imports."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bot.tools.catalog import ToolRegistry
from bot.tools.integration_settings import IntegrationSettings

if TYPE_CHECKING:
    from bot.tools.mcp.hub import McpHub


@dataclass
class Integrations:
    mcp: McpHub | None = None
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    @classmethod
    def attach(cls, registry: ToolRegistry, settings: IntegrationSettings) -> Integrations:
        """Add every configured integration's tools to `registry`."""
        integrations = cls()
        if settings.github_token is not None:
            from bot.tools.packs.github import GitHubPack

            github = GitHubPack.from_settings(settings)
            for tool in github.tools():
                registry.add(tool)
            integrations.closers.append(github.close)
        if settings.linear_api_key is not None:
            from bot.tools.packs.linear import LinearPack

            linear = LinearPack.from_settings(settings)
            for tool in linear.tools():
                registry.add(tool)
            integrations.closers.append(linear.close)
        if settings.mcp_servers:
            from bot.tools.mcp.hub import McpHub

            integrations.mcp = McpHub(settings.mcp_servers, check_every=settings.mcp_check_seconds)
            registry.add_source(integrations.mcp)
        return integrations

    async def start(self, wait: float = 10.0) -> None:
        if self.mcp is not None:
            await self.mcp.start(wait)

    async def close(self) -> None:
        if self.mcp is not None:
            await self.mcp.close()
        for close in self.closers:
            with contextlib.suppress(Exception):
                await close()
