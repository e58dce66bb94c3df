"""The tools the model may call: fixed packs loaded once, and sources whose tools change at run
time.

Packs are modules with a `TOOLS` list; `TOOL_PACKS` names the modules to load, so a team adds
its own pack without touching this code. Tools whose schema is only known at run time (an MCP
server's) come from a `ToolSource`: the registry asks it on every model round which tools it
offers, so a server that goes down withholds its tools and gets them back when it returns.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterable
from dataclasses import replace
from typing import Any, Protocol

from bot.tools.registry import Tool

MAX_TOOLS = 128  # the most tools one chat completions request may carry
log = logging.getLogger(__name__)


class UnknownPack(Exception):
    pass


class ToolSource(Protocol):
    """Tools known only at run time (an MCP server's)."""

    def offered(self) -> list[Tool[Any]]:
        """The tools the model may call now (a server that is down offers none)."""

    def find(self, name: str) -> Tool[Any] | None:
        """A tool by name even while its server is down, so cards keep their policy and
        confirmation and a call says plainly why it cannot run."""

    def notices(self) -> list[str]:
        """What the model should know about tools it is not offered now (a server down)."""


class ToolRegistry:
    def __init__(self, tools: Iterable[Tool[Any]] = ()) -> None:
        self._tools: dict[str, Tool[Any]] = {}
        self._schemas: list[dict[str, Any]] | None = None
        self._sources: list[ToolSource] = []
        self._warned = False
        for tool in tools:
            self.add(tool)

    def add_source(self, source: ToolSource) -> None:
        self._sources.append(source)

    def add(self, tool: Tool[Any]) -> None:
        if tool.name in self._tools:
            raise ValueError(f"two tools are named {tool.name!r}")
        self._tools[tool.name] = tool
        self._schemas = None

    def get(self, name: str) -> Tool[Any] | None:
        tool = self._tools.get(name)
        for source in self._sources:
            if tool is not None:
                break
            tool = source.find(name)
        return tool

    def offered(self) -> list[Tool[Any]]:
        return [*self._tools.values(), *(t for s in self._sources for t in s.offered())]

    def notices(self) -> list[str]:
        return [notice for source in self._sources for notice in source.notices()]

    def __iter__(self) -> Any:
        return iter(self.offered())

    def __len__(self) -> int:
        return len(self.offered())

    def schemas(self) -> list[dict[str, Any]]:
        """The JSON schemas of the tools offered now (the fixed ones built once; they go with
        every model request), at most `MAX_TOOLS`: the model's API refuses a request with
        more, so the first ones (built-in packs, then servers in their configured order) win."""
        if self._schemas is None:
            self._schemas = [tool.schema() for tool in self._tools.values()]
        if not self._sources:
            return self._schemas[:MAX_TOOLS]
        every = [*self._schemas, *(t.schema() for s in self._sources for t in s.offered())]
        if len(every) > MAX_TOOLS and not self._warned:
            self._warned = True
            log.warning(
                "%d tools are offered but a request may carry %d; the rest are left out "
                "(narrow them with allowed_tools in MCP_SERVERS)",
                len(every),
                MAX_TOOLS,
            )
        return every[:MAX_TOOLS]

    @classmethod
    def from_packs(cls, modules: Iterable[str]) -> ToolRegistry:
        registry = cls()
        for module_name in modules:
            try:
                module = importlib.import_module(module_name)
            except ImportError as exc:
                raise UnknownPack(f"cannot import tool pack {module_name!r}: {exc}") from exc
            tools = getattr(module, "TOOLS", None)
            if not isinstance(tools, list | tuple):
                raise UnknownPack(f"tool pack {module_name!r} has no TOOLS list")
            pack = getattr(module, "PACK", module_name.rsplit(".", 1)[-1])
            for tool in tools:
                registry.add(_with_pack(tool, pack))
        return registry


def _with_pack(tool: Tool[Any], pack: str) -> Tool[Any]:
    return replace(tool, pack=tool.pack or pack)
