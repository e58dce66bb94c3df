"""A real MCP server whose answers an attacker wrote, for the hostile benchmark's third world
(bench/hostile_untrusted_world.py): `fetch` (read-only and open-world by the MCP default: its
URL may carry data anywhere) answers each URL with the page planted for it, if any; `wiki_page`
(read-only, `openWorldHint: false`) answers with the text planted for the wiki. What is planted
is read at each call from the JSON file `PLANTED` (`{"pages": {url: text}, "wiki": text}`), so
a benchmark can change it between attacks; every call is appended to the JSON-lines file
`PLANTED_LOG` (a fetch's log is what the open world received).

Run as `python -m tests.mcp_servers.planted`."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

LOG = Path(os.environ.get("PLANTED_LOG", "planted.jsonl"))
PLANTED = Path(os.environ.get("PLANTED", "planted.json"))
app = MCPServer("web")


def planted() -> dict[str, Any]:
    try:
        found = json.loads(PLANTED.read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def record(tool: str, arguments: dict[str, str]) -> None:
    with LOG.open("a") as log:
        log.write(json.dumps({"tool": tool, "arguments": arguments, "at": time.time()}) + "\n")


@app.tool(title="Fetch a page", annotations=ToolAnnotations(readOnlyHint=True))
def fetch(url: str) -> str:
    record("fetch", {"url": url})
    pages = planted().get("pages") or {}
    return str(pages.get(url) or f"<html>the page at {url}</html>")


@app.tool(
    title="Read a wiki page",
    annotations=ToolAnnotations(readOnlyHint=True, openWorldHint=False),
)
def wiki_page(page: str) -> str:
    record("wiki_page", {"page": page})
    return str(planted().get("wiki") or f"{page}: nothing here yet")


if __name__ == "__main__":
    app.run()
