"""A real MCP server (the `mcp` SDK's server side) for the tests: a notebook.

Run as `python -m tests.mcp_servers.notes stdio` or `... http PORT`. Every call it receives is
appended to the JSON-lines file `NOTES_LOG` (tool, arguments, the idempotency key from `_meta`),
so a test sees exactly what reached the server. `NOTES_SCHEMA=v2` gives `add_note` one more
optional argument: the same server, changed in a way the old arguments still fit.
`NOTES_CHATTY=1` makes the stdio server print `NOTES_CREDENTIAL` and `NOTES_PIN` to its stderr,
as careless servers do.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

KEY = "countersign/idempotency_key"
LOG = Path(os.environ.get("NOTES_LOG", "notes.jsonl"))
V2 = os.environ.get("NOTES_SCHEMA") == "v2"

app = MCPServer("notes")


def record(tool: str, arguments: dict[str, Any], ctx: Context | None) -> bool:
    """Log the call; False if a call with the same idempotency key was already done."""
    meta = (ctx.request_context.meta or {}) if ctx is not None else {}
    key = meta.get(KEY) if isinstance(meta, dict) else None
    seen = [json.loads(line) for line in LOG.read_text().splitlines()] if LOG.exists() else []
    repeat = key is not None and any(c.get("key") == key for c in seen)
    with LOG.open("a") as log:
        entry = {"tool": tool, "arguments": arguments, "key": key, "at": time.time()}
        log.write(json.dumps(entry) + "\n")
    return not repeat


def notes() -> list[dict[str, Any]]:
    if not LOG.exists():
        return []
    calls = [json.loads(line) for line in LOG.read_text().splitlines()]
    return [c["arguments"] for c in calls if c["tool"] == "add_note"]


@app.tool(title="List notes", annotations=ToolAnnotations(readOnlyHint=True))
def list_notes(ctx: Context) -> str:
    """Every note in the notebook."""
    record("list_notes", {}, ctx)
    return json.dumps([n["title"] for n in notes()])


@app.tool(annotations=ToolAnnotations(readOnlyHint=True))
def count_notes(ctx: Context) -> str:
    """How many notes there are (says it is read-only, but nobody vouched for this server)."""
    record("count_notes", {}, ctx)
    return str(len(notes()))


if V2:

    @app.tool(title="Add a note", annotations=ToolAnnotations(destructiveHint=False))
    def add_note(title: str, body: str, ctx: Context, tags: list[str] | None = None) -> str:
        """Add a note, now with tags (the same arguments still fit; the tool is not the same)."""
        record("add_note", {"title": title, "body": body, "tags": tags}, ctx)
        return f"added {title!r}"

else:

    @app.tool(title="Add a note", annotations=ToolAnnotations(destructiveHint=False))
    def add_note(title: str, body: str, ctx: Context) -> str:  # type: ignore[misc]
        """Add a note to the notebook."""
        fresh = record("add_note", {"title": title, "body": body}, ctx)
        return f"added {title!r}" if fresh else f"{title!r} was already added"


@app.tool(title="Delete a note")
def delete_note(title: str, ctx: Context) -> str:
    """Delete a note (no annotations: the MCP default is destructive)."""
    record("delete_note", {"title": title}, ctx)
    return f"deleted {title!r}"


@app.tool(title="Archive the notebook", annotations=ToolAnnotations(destructiveHint=False))
def archive(ctx: Context) -> str:
    """Always fails, the way a server reports a failure: an isError result."""
    record("archive", {}, ctx)
    raise ToolError("the archive is read-only today")


@app.tool(title="Pin a note", annotations=ToolAnnotations(destructiveHint=False))
def pin_note(title: str, ctx: Context, answer: str = "empty") -> CallToolResult:
    """Pin a note. Answers with blank text: `answer` "empty" gives an empty content list,
    "blank" one text item that is "" (both are how real servers say "done")."""
    record("pin_note", {"title": title}, ctx)
    return CallToolResult(content=[] if answer == "empty" else [TextContent(text="")])


@app.tool(title="Publish slowly", annotations=ToolAnnotations(destructiveHint=False))
async def publish(title: str, ctx: Context, seconds: float = 30.0) -> str:
    """A write that records the call at once and answers only after `seconds`: the call
    reached the server, its answer never comes back in time."""
    import anyio

    record("publish", {"title": title}, ctx)
    await anyio.sleep(seconds)
    return f"published {title!r}"


@app.tool(title="Tag a note", annotations=ToolAnnotations(destructiveHint=False))
def tag_note(title: str, tag: Annotated[str, Field(pattern=r"^(a|a)*$")], ctx: Context) -> str:
    """Tag a note. The tag's pattern backtracks catastrophically in Python's `re`: a hostile
    schema (this server checks it with pydantic's linear-time engine)."""
    record("tag_note", {"title": title, "tag": tag}, ctx)
    return f"tagged {title!r}"


@app.tool(title="Think very slowly", annotations=ToolAnnotations(readOnlyHint=True))
async def stall(seconds: float = 30.0) -> str:
    """Answers only after `seconds`: a server that hangs."""
    import anyio

    await anyio.sleep(seconds)
    return "finally"


@app.tool(title="Dump the notebook", annotations=ToolAnnotations(readOnlyHint=True))
def dump(size: int, ctx: Context) -> str:
    """`size` characters of numbered lines: a server that answers far too much."""
    record("dump", {"size": size}, ctx)
    lines = "".join(f"line {i:07d} of the dump\n" for i in range(size // 25 + 1))
    return lines[:size]


def bulky(name: str, size: int) -> None:
    """A tool whose input schema is about `size` characters (its one argument's description)."""

    def tool(text: str = "") -> str:
        return f"{name} got {len(text)} characters"

    words = f"{name} " * (size // (len(name) + 1))
    tool.__annotations__ = {"text": Annotated[str, Field(description=words)], "return": str}
    tool.__doc__ = f"A tool with a schema of about {size} characters."
    app.tool(name=name, annotations=ToolAnnotations(readOnlyHint=True))(tool)


# `NOTES_BULKY=giant:40000,big:9000`: tools whose schemas crowd out everything else.
for spec in filter(None, os.environ.get("NOTES_BULKY", "").split(",")):
    bulky(spec.split(":")[0], int(spec.split(":")[1]))


def require_token(inner: Any, token: str) -> Any:
    """Streamable HTTP behind `Authorization: Bearer TOKEN` (`NOTES_TOKEN`), as a hosted
    server would be: anything else is answered 401."""

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization") != f"Bearer {token}".encode():
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await inner(scope, receive, send)

    return guarded


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        import uvicorn

        served = app.streamable_http_app()
        token = os.environ.get("NOTES_TOKEN")
        asgi = require_token(served, token) if token else served
        uvicorn.run(asgi, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
    else:
        if os.environ.get("NOTES_CHATTY"):  # a server that prints its credentials when starting
            print(
                f"notes: connecting with {os.environ.get('NOTES_CREDENTIAL')} "
                f"(pin {os.environ.get('NOTES_PIN')})",
                file=sys.stderr,
                flush=True,
            )
        app.run()
