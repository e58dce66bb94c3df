"""The notebook (`tests/mcp_servers/notes.py`) as a stdio server that will not stop: it ignores
SIGTERM and, once its input is closed, stays alive anyway. It writes its pid to the file
`STUBBORN_PID`, and the file `STUBBORN_CLOSED` once the bot has closed its input. SIGUSR1 makes
it hang up: its stdout becomes /dev/null, so the bot sees the connection end while the process
lives on (the bot then tears the connection down, and a stop can land in the middle of that).
SIGUSR2 makes it go silent instead: it answers nothing more but keeps its stdout open, so the
bot's requests time out and the bot never reads the end of its stdout.

Run as `python -m tests.mcp_servers.stubborn`."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path
from types import FrameType

from tests.mcp_servers.notes import app

WIRE = os.readlink("/proc/self/fd/1")  # the pipe to the bot (the SDK serves it from a copy)


def hang_up(_signal: int, _frame: FrameType | None) -> None:
    null = os.open(os.devnull, os.O_WRONLY)
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/self/fd/{fd}") == WIRE:
                os.dup2(null, int(fd))  # once every copy is gone, the bot reads EOF
    os.close(null)


def go_silent(_signal: int, _frame: FrameType | None) -> None:
    """Answer nothing more (this handler holds the event loop) and keep stdout open."""
    stay_after_input_closed()


def stay_after_input_closed() -> None:
    while os.read(0, 65536):  # until the bot closes our input
        pass
    Path(os.environ["STUBBORN_CLOSED"]).touch()
    while True:
        time.sleep(1)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGUSR1, hang_up)
    signal.signal(signal.SIGUSR2, go_silent)
    Path(os.environ["STUBBORN_PID"]).write_text(str(os.getpid()))
    try:
        app.run()
    finally:
        stay_after_input_closed()
