"""An MCP server's tool as a Countersign `Tool`: its name for the model, whether it needs a card,
what the card shows and how a call's result comes back.

Gating trusts the operator, not the server: a tool runs without a card only if the operator
listed it in `read_only_tools`, or trusts the server's annotations and the tool says
`readOnlyHint: true`. Everything else is a write. A write is destructive (a confirmation on
Approve) if the operator says so or the tool does not say `destructiveHint: false` (the MCP
default for a tool that is not read-only is destructive).

The card cannot show old values (an MCP tool does not say what it will change), so it says the
current state is unknown and lists every argument. Its preview pins the hash of the tool's
definition as the server describes it at that moment; the executor previews again just before
running, and a tool the server changed in between is stale.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, cast

import mcp_types as types

from bot.provenance import Source
from bot.tools.mcp.config import McpServerConfig
from bot.tools.mcp.connection import McpConnection
from bot.tools.registry import Change, Outcome, Preview, Tool, ToolContext, ToolError
from bot.tools.schema_arguments import SchemaArguments, object_schema

MAX_NAME = 64
MAX_RESULT_CHARS = 20_000
IDEMPOTENCY_META_KEY = "countersign/idempotency_key"
_INVALID = re.compile(r"[^A-Za-z0-9_-]")


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def exposed_name(server: str, tool: str) -> str:
    """`SERVER__TOOL` in the characters the model's API allows, at most 64 long; a shortened
    or rewritten name keeps a hash of the original so two tools never meet."""
    clean = _INVALID.sub("_", tool)
    name = f"{server}__{clean}"
    if len(name) <= MAX_NAME and clean == tool:
        return name
    digest = hashlib.sha256(tool.encode()).hexdigest()[:8]
    room = MAX_NAME - len(server) - 2 - 9
    return f"{server}__{clean[:room]}_{digest}"


def definition_hash(tool: types.Tool) -> str:
    """What the approver relied on: the name, words, argument schema and annotations."""
    shown = {
        "name": tool.name,
        "title": tool.title,
        "description": tool.description,
        "inputSchema": tool.input_schema,
        "annotations": tool.annotations.model_dump(mode="json", exclude_none=True)
        if tool.annotations
        else None,
    }
    canonical = json.dumps(shown, sort_keys=True, separators=(",", ":"), default=str)
    return "mcp-sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def is_read_only(tool: types.Tool, config: McpServerConfig) -> bool:
    if tool.name in config.read_only_tools:
        return True
    hints = tool.annotations
    return config.trust_annotations and hints is not None and hints.read_only_hint is True


def is_destructive(tool: types.Tool, config: McpServerConfig) -> bool:
    if tool.name in config.destructive_tools:
        return True
    hints = tool.annotations
    return hints is None or hints.destructive_hint is not False


def is_open_world(tool: types.Tool) -> bool:
    """The MCP default: a tool is open-world unless its annotations say `openWorldHint:
    false` (the server's own word; it can only make the policy ask less on its reads, so
    the operator's `trust_annotations` is not needed for a tool to say it)."""
    hints = tool.annotations
    return hints is None or hints.open_world_hint is not False


def _title(tool: types.Tool) -> str:
    hints = tool.annotations
    return tool.title or (hints.title if hints and hints.title else None) or tool.name


def _value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _kept(texts: list[str], limit: int) -> tuple[list[str], int]:
    """The texts, in order, up to `limit` characters in all; and how many characters were cut."""
    kept: list[str] = []
    room, cut = limit, 0
    for text in texts:
        if room <= 0 and text:
            cut += len(text)
            continue
        kept.append(text[:room])
        cut += len(text) - len(kept[-1])
        room -= len(kept[-1])
    return kept, cut


def _result(server: str, result: types.CallToolResult) -> Outcome:
    """What is kept of a server's answer: at most `MAX_RESULT_CHARS` (it is stored with the
    conversation or the proposal, and a server may answer megabytes)."""
    texts = [c.text for c in result.content if isinstance(c, types.TextContent)]
    others = [c.type for c in result.content if not isinstance(c, types.TextContent)]
    if result.is_error:
        message = " ".join(texts[:20]).strip() or "no message"
        raise ToolError(  # the server's words: data from it, like its result
            f"the MCP server {server} reported an error: {clip(message, 800)}",
            source=server_source(server),
        )
    texts, cut = _kept(texts, MAX_RESULT_CHARS)
    body: dict[str, Any] = {"status": "ok", "content": texts}
    if result.structured_content is not None:
        structured = json.dumps(result.structured_content, ensure_ascii=False, default=str)
        if len(structured) + sum(map(len, texts)) <= MAX_RESULT_CHARS:
            body["structured"] = result.structured_content
        else:
            cut += len(structured)
    if cut:
        body["truncated"] = f"{cut} characters of the server's answer were not kept"
    if others:
        body["omitted"] = f"{len(others)} non-text item(s) ({', '.join(sorted(set(others)))})"
    # A blank answer (no content, or text "") is how many servers say "done".
    lines = " ".join(texts).strip().splitlines()
    # What the model read came from the server (whoever wrote what it serves): its source.
    said = clip(lines[0], 300) if lines else "done"
    return Outcome(body, said, source=server_source(server))


def server_source(server: str) -> Source:
    """What an MCP server's answer (or its error) is, as a source."""
    return Source("tool", f"the {server} server")


def make_tool(connection: McpConnection, tool: types.Tool) -> Tool[SchemaArguments]:
    server, config, original = connection.name, connection.config, tool.name
    title = _title(tool)
    about = tool.description or title

    async def run(arguments: SchemaArguments, ctx: ToolContext) -> Outcome:
        meta = {IDEMPOTENCY_META_KEY: ctx.idempotency_key} if ctx.idempotency_key else None
        result = await connection.call(
            original,
            arguments.model_dump(mode="json"),
            cast(types.RequestParamsMeta | None, meta),
        )
        return _result(server, result)

    async def preview(arguments: SchemaArguments, ctx: ToolContext) -> Preview:
        now = next((t for t in await connection.fresh_definitions() if t.name == original), None)
        if now is None:
            raise ToolError(f"the MCP server {server} no longer offers the tool {original}")
        values = arguments.model_dump(mode="json")
        changes = tuple(Change(name, None, _value(v)) for name, v in values.items())
        return Preview(
            clip(
                f"{title} on the MCP server {server}: {about}. Current state unknown: the "
                "server does not say what this changes, so the card shows every argument.",
                600,
            ),
            changes,
            pin=definition_hash(now),
            pin_changed=f"the MCP server {server} changed the tool {original}",
        )

    read_only = is_read_only(tool, config)
    return Tool(
        name=exposed_name(server, original),
        description=clip(f"{title}: {about}" if about != title else title, 1024),
        arguments=SchemaArguments,
        run=run,
        preview=None if read_only else preview,
        destructive=not read_only and is_destructive(tool, config),
        pack=server,
        running_label=f"Asking {server}: {title}"[:100],
        input_schema=object_schema(tool.input_schema),
        open_world=is_open_world(tool),
    )


def unreachable_tool(connection: McpConnection, name: str) -> Tool[SchemaArguments]:
    """A tool of a server never seen up (since the bot started): it keeps its server's policy
    and is treated as the most careful kind (a destructive write) until the server says more."""

    async def refuse(arguments: SchemaArguments, ctx: ToolContext) -> Any:
        await connection.fresh_definitions()  # raises Unreachable while it is down
        raise ToolError(f"the MCP server {connection.name} no longer offers {name}")

    return Tool(
        name=name,
        description=f"A tool of the MCP server {connection.name} (not reachable)",
        arguments=SchemaArguments,
        run=refuse,
        preview=refuse,
        destructive=True,
        pack=connection.name,
        input_schema=object_schema(None),
        open_world=True,
    )
