"""Real MCP servers for the tests: the notebook in `tests/mcp_servers/notes.py`, run over stdio
by the bot itself or over Streamable HTTP as a separate process the test can kill and restart."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx2

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stdio_server(log: Path, **extra: Any) -> dict[str, Any]:
    return {
        "command": sys.executable,
        "args": ["-m", "tests.mcp_servers.notes", "stdio"],
        "env": {"NOTES_LOG": str(log), "PYTHONPATH": str(ROOT)},
        "cwd": str(ROOT),
        **extra,
    }


def calls(log: Path, tool: str | None = None) -> list[dict[str, Any]]:
    """What reached the server, in order."""
    if not log.exists():
        return []
    found = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return [c for c in found if tool is None or c["tool"] == tool]


class HttpNotes:
    """The notebook over Streamable HTTP in its own process."""

    def __init__(self, log: Path, port: int | None = None) -> None:
        self.log = log
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def config(self, **extra: Any) -> dict[str, Any]:
        return {"url": self.url, **extra}

    async def start(self, schema: str = "v1", token: str | None = None) -> HttpNotes:
        env = os.environ | {"NOTES_LOG": str(self.log), "NOTES_SCHEMA": schema}
        if token:
            env["NOTES_TOKEN"] = token
        env["PYTHONPATH"] = str(ROOT)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.mcp_servers.notes", "http", str(self.port)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        async with httpx2.AsyncClient() as client:
            while time.monotonic() < deadline:
                try:
                    await client.get(self.url, timeout=1)
                    return self
                except httpx2.TransportError:
                    await asyncio.sleep(0.05)
        raise RuntimeError("the HTTP MCP server did not start")

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(10)
            self.process = None


async def until(condition: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)
