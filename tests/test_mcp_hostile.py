"""A hostile tool server cannot stall or disable the bot: through a real MCP server, the real
bot in this process (so its event loop is the one the test watches) and Slack over loopback."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from pathlib import Path

from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack
from tests.harness import RunningBot, stop_bot
from tests.mcp_helpers import calls, stdio_server
from tests.test_approvals_flow import call, tool_results
from tests.test_mcp import mcp_bot


async def loop_gaps(gaps: list[float]) -> None:
    """How long the event loop went without running this task (it asks every 10 ms)."""
    last = time.perf_counter()
    while True:
        await asyncio.sleep(0.01)
        now = time.perf_counter()
        gaps.append(now - last)
        last = now


async def slack_acks(bot: RunningBot, waits: list[float]) -> None:
    """Slack's requests keep coming while a turn runs; each must be answered at once."""
    body = json.dumps({"type": "url_verification", "challenge": "c", "token": "t"}).encode()
    while True:
        started = time.perf_counter()
        status, _ = await bot.post_raw(body, bot.signed_headers(body))
        assert status == 200
        waits.append(time.perf_counter() - started)
        await asyncio.sleep(0.05)


async def test_a_catastrophic_schema_pattern_neither_stalls_the_bot_nor_reaches_the_server(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "notes.jsonl"
    bot = await mcp_bot(fake_slack, fake_model, sqlite_url, {"notes": stdio_server(log)})
    gaps: list[float] = []
    waits: list[float] = []
    watchers = [
        asyncio.create_task(loop_gaps(gaps)),
        asyncio.create_task(slack_acks(bot, waits)),
    ]
    try:
        # `^(a|a)*$` against 24 a's and a '!': seconds of backtracking in Python's `re`.
        hostile = "a" * 24 + "!"
        fake_model.script(
            Script(
                tool_calls=[
                    call("notes__tag_note", {"title": "Plan", "tag": "b"}),
                    call("notes__tag_note", {"title": "Plan", "tag": hostile}, "call_2"),
                ]
            ),
            Script(text="Neither tag fits."),
        )
        started = time.perf_counter()
        await bot.mention("C1", "tag the plan", fake_slack)
        await bot.idle()
        took = time.perf_counter() - started
    finally:
        for watcher in watchers:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        await stop_bot(bot)
    assert max(gaps) < 0.5, f"the event loop stalled {max(gaps):.1f} s"
    assert waits
    assert max(waits) < 0.5, f"Slack waited {max(waits):.1f} s for an answer"
    assert took < 5
    plain, slow = tool_results(fake_model)
    assert plain["status"] == slow["status"] == "invalid_arguments"
    assert "tag: 'b' does not match '^(a|a)*$'" in plain["error"]
    assert "could not be checked against the tool's pattern" in slow["error"]
    assert "too slow" in slow["error"]
    assert fake_slack.cards("C1") == []
    assert calls(log, "tag_note") == []
