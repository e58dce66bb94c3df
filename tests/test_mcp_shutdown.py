"""A stdio MCP server that will not stop cannot hold the bot's shutdown: the bot stops within a
few seconds however its stop lands, and the server's process is gone (terminated, then killed),
which the log says once in plain words. Through the real bot and a real stdio MCP server."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai import FakeOpenAI
from tests.fakes.slack import FakeSlack
from tests.harness import RunningBot, stop_bot
from tests.mcp_helpers import ROOT, until
from tests.test_mcp import mcp_bot

STOPS_WITHIN = 10.0  # the SDK's own teardown is 2 s + 2 s, then SIGKILL


def stubborn(tmp_path: Path) -> dict[str, Any]:
    return {
        "command": sys.executable,
        "args": ["-m", "tests.mcp_servers.stubborn"],
        "env": {
            "NOTES_LOG": str(tmp_path / "notes.jsonl"),
            "STUBBORN_PID": str(tmp_path / "pid"),
            "STUBBORN_CLOSED": str(tmp_path / "closed"),
            "PYTHONPATH": str(ROOT),
        },
        "cwd": str(ROOT),
        "read_only_tools": ["list_notes"],
        # A server that hung up is noticed when a request goes unanswered: the SDK does not
        # fail requests when the server's stdout ends.
        "timeout_seconds": 2,
    }


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def stop_in_time(bot: RunningBot, pid: int) -> tuple[float, bool]:
    """Stop the bot: how long it took, and whether the server outlived it. If the bot hangs,
    the server is killed here so the test's event loop can still end (and no process outlives
    the test)."""
    started = time.monotonic()
    stopping = asyncio.ensure_future(stop_bot(bot))
    try:
        await asyncio.wait({stopping}, timeout=STOPS_WITHIN + 5)
        assert stopping.done(), f"the bot did not stop within {STOPS_WITHIN + 5:g} s"
        stopping.result()
        return time.monotonic() - started, alive(pid)
    finally:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(BaseException):
            await stopping


@pytest.mark.parametrize("when", ["connected", "it_hung_up", "it_went_silent"])
async def test_a_server_that_will_not_exit_is_killed_and_the_bot_stops_in_seconds(
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    sqlite_url: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    when: str,
) -> None:
    bot = await mcp_bot(fake_slack, fake_model, sqlite_url, {"stubborn": stubborn(tmp_path)})
    pid = int((tmp_path / "pid").read_text())
    hub = bot.countersign.integrations.mcp
    assert hub is not None
    await until(lambda: hub.connections["stubborn"].up)
    if when != "connected":
        # The server hangs up (or stops answering) and lives on: the bot closes its input and
        # waits for it to exit (2 s, then SIGTERM, 2 s, then SIGKILL); the bot is asked to
        # stop during that wait.
        os.kill(pid, signal.SIGUSR1 if when == "it_hung_up" else signal.SIGUSR2)
        await until((tmp_path / "closed").exists)
    took, left_behind = await stop_in_time(bot, pid)
    assert took < STOPS_WITHIN
    assert not left_behind
    said = [r.getMessage() for r in caplog.records if "did not exit within" in r.getMessage()]
    assert len(said) == 1, said
    assert said[0].startswith(
        "MCP server stubborn did not exit within 2 s of the bot closing its input, so it was "
        "killed (it ignored SIGTERM)"
    )
