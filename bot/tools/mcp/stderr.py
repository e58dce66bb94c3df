"""A stdio server's stderr, line by line, into the bot's (redacting) log.

A child process inherits the bot's stderr by default, and writes to it straight past the logging
handlers that redact secrets: a server printing its own token would put it in the log verbatim.
The `mcp` SDK's `stdio_client` takes the file the child's stderr goes to; this one is the write
end of a pipe whose read end a thread turns into log lines (a thread, so a chatty server costs
the event loop nothing). Lines are cut at `MAX_LINE` bytes, so a server writing without newlines
cannot grow the bot's memory.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import TextIO

log = logging.getLogger("bot.tools.mcp.server_stderr")

MAX_LINE = 2_000


class StderrToLog:
    """Use `file` as the child's stderr while it runs; `close()` once it has been started and
    stopped (the thread ends when the last writer, the child, is gone)."""

    def __init__(self, server: str) -> None:
        self.server = server
        read_fd, write_fd = os.pipe()
        self.file: TextIO = os.fdopen(write_fd, "w", encoding="utf-8", errors="replace")
        self._thread = threading.Thread(
            target=self._pump, args=(read_fd,), name=f"mcp-stderr-{server}", daemon=True
        )
        self._thread.start()

    def _pump(self, read_fd: int) -> None:
        with os.fdopen(read_fd, "rb") as stream:
            while True:
                raw = stream.readline(MAX_LINE)
                if not raw:
                    return
                line = raw.decode("utf-8", errors="replace").rstrip()
                if line:
                    log.info("MCP server %s says: %s", self.server, line)

    def close(self) -> None:
        """Our copy of the write end: after this, EOF comes when the child's copy closes."""
        self.file.close()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)
