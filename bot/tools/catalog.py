"""The tools the model may call: fixed packs loaded once, and sources whose tools change at run
time.

Packs are modules with a `TOOLS` list; `TOOL_PACKS` names the modules to load, so a team adds
its own pack without touching this code. Tools whose schema is only known at run time (an MCP
server's) come from a `ToolSource`: the registry asks it on every model round which tools it
offers, so a server that goes down withholds its tools and gets them back when it returns.
"""

from __future__ import annotations

import importlib
import json
import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from typing import Any, Protocol

from bot.caches import BoundedCache
from bot.metrics import TOOLS_WITHHELD
from bot.tools.registry import Tool

MAX_TOOLS = 128  # the most tools one chat completions request may carry
MAX_SCHEMA_CHARS = 16_000  # one run-time tool's schema, as JSON
CHARS_PER_TOKEN = 3  # an over-estimate of a schema's tokens, as TokenCounter's for other models
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
    def __init__(
        self, tools: Iterable[Tool[Any]] = (), *, max_tool_tokens: int | None = None
    ) -> None:
        self._tools: dict[str, Tool[Any]] = {}
        self._schemas: list[dict[str, Any]] | None = None
        self._fixed_chars = 0
        self._sources: list[ToolSource] = []
        # What the run-time tools' schemas may take of every request, in tokens (None: no cap).
        self.max_tool_tokens = max_tool_tokens
        self._sized: BoundedCache[int, tuple[Tool[Any], dict[str, Any], int]] = BoundedCache(
            4 * MAX_TOOLS
        )
        self._withheld: dict[tuple[str, str], str] = {}  # (pack, tool) -> reason, last round
        for tool in tools:
            self.add(tool)

    def add_source(self, source: ToolSource) -> None:
        self._sources.append(source)

    def add(self, tool: Tool[Any]) -> None:
        if tool.name in self._tools:
            raise ValueError(f"two tools are named {tool.name!r}")
        self._tools[tool.name] = tool
        self._schemas = None

    def with_defaults(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """`arguments` with the tool's defaults filled in where a field was left out (a
        model's fields, or a JSON schema's top-level `default`s): what a policy condition
        reads, so an optional field left out reads as its default, not as an error."""
        tool = self.get(name)
        if tool is None:
            return arguments
        filled = dict(arguments)
        if tool.input_schema is not None:
            properties = tool.input_schema.get("properties")
            for field, spec in (properties if isinstance(properties, dict) else {}).items():
                if field not in filled and isinstance(spec, dict) and "default" in spec:
                    filled[field] = spec["default"]
            return filled
        for field, info in tool.arguments.model_fields.items():
            if field not in filled and not info.is_required():
                default = info.get_default(call_default_factory=True)
                filled[field] = json.loads(json.dumps(default, default=str))
        return filled

    def get(self, name: str) -> Tool[Any] | None:
        tool = self._tools.get(name)
        for source in self._sources:
            if tool is not None:
                break
            tool = source.find(name)
        return tool

    def for_model(self, name: str) -> Tool[Any] | None:
        """The tool a model's call names, or None if the model may not call it (unknown, or
        an internal action such as a budget raise: the model is told there is no such tool)."""
        tool = self.get(name)
        return None if tool is None or tool.internal else tool

    def offered(self) -> list[Tool[Any]]:
        """The tools the model may call now (internal actions never)."""
        fixed = (t for t in self._tools.values() if not t.internal)
        return [*fixed, *(t for s in self._sources for t in s.offered())]

    def notices(self) -> list[str]:
        return [notice for source in self._sources for notice in source.notices()]

    def __iter__(self) -> Any:
        return iter(self.offered())

    def __len__(self) -> int:
        return len(self.offered())

    def _schema(self, tool: Tool[Any]) -> tuple[dict[str, Any], int]:
        """A run-time tool's schema and its size in characters (kept while the tool is)."""
        known = self._sized.get(id(tool))
        if known is None or known[0] is not tool:
            schema = tool.schema()
            known = (tool, schema, len(json.dumps(schema, ensure_ascii=False)))
            self._sized[id(tool)] = known
        return known[1], known[2]

    def schemas(self) -> list[dict[str, Any]]:
        """The JSON schemas of the tools offered now (the fixed ones built once; they go with
        every model request). Run-time tools (an MCP server's) are held to limits a server
        cannot talk its way past: one schema of more than `MAX_SCHEMA_CHARS` is left out, the
        largest are left out until all fit `max_tool_tokens`, and a request carries at most
        `MAX_TOOLS` (the model's API refuses more; built-in packs, then servers in their
        configured order, win). What is left out is logged and counted (`TOOLS_WITHHELD`)."""
        if self._schemas is None:
            self._schemas = [t.schema() for t in self._tools.values() if not t.internal]
            self._fixed_chars = len(json.dumps(self._schemas, ensure_ascii=False))
        if not self._sources:
            return self._schemas[:MAX_TOOLS]
        withheld: dict[tuple[str, str], str] = {}
        kept: list[tuple[Tool[Any], dict[str, Any], int]] = []
        for tool in (t for s in self._sources for t in s.offered()):
            schema, size = self._schema(tool)
            if size > MAX_SCHEMA_CHARS:
                withheld[(tool.pack or "-", tool.name)] = "schema_too_large"
            else:
                kept.append((tool, schema, size))
        if self.max_tool_tokens is not None:
            room = self.max_tool_tokens * CHARS_PER_TOKEN - self._fixed_chars
            total = sum(size for _, _, size in kept)
            for tool, _, size in sorted(kept, key=lambda k: k[2], reverse=True):
                if total <= room:
                    break
                total -= size
                withheld[(tool.pack or "-", tool.name)] = "over_budget"
            kept = [k for k in kept if (k[0].pack or "-", k[0].name) not in withheld]
        for tool, _, _ in kept[max(0, MAX_TOOLS - len(self._schemas)) :]:
            withheld[(tool.pack or "-", tool.name)] = "too_many"
        self._report(withheld)
        return [*self._schemas, *(schema for _, schema, _ in kept)][:MAX_TOOLS]

    def _report(self, withheld: dict[tuple[str, str], str]) -> None:
        if withheld == self._withheld:
            return
        for pack, reason in {(p, r) for (p, _), r in self._withheld.items()}:
            TOOLS_WITHHELD.labels(pack=pack, reason=reason).set(0)
        counts = Counter((pack, reason) for (pack, _), reason in withheld.items())
        for (pack, reason), count in counts.items():
            TOOLS_WITHHELD.labels(pack=pack, reason=reason).set(count)
        fresh = sorted(set(withheld.items()) - set(self._withheld.items()))
        self._withheld = withheld
        if fresh:
            log.warning(
                "%d tool(s) are left out of model requests: %s (a schema may take %d "
                "characters; all tools' schemas %s tokens; a request %d tools; narrow the "
                "servers with allowed_tools in MCP_SERVERS)",
                len(fresh),
                ", ".join(f"{name[:64]} ({reason})" for (_, name), reason in fresh[:20]),
                MAX_SCHEMA_CHARS,
                self.max_tool_tokens,
                MAX_TOOLS,
            )

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
