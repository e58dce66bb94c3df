"""A hostile tool server cannot stall or disable the bot: through a real MCP server, the real
bot in this process (so its event loop is the one the test watches) and Slack over loopback."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from pathlib import Path

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import select

from bot.conversation.tool_calls import MAX_STORED_RESULT
from bot.db.models import Message, Role
from bot.slack import cards
from bot.tools.catalog import CHARS_PER_TOKEN
from tests.data_blocks import unwrapped
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
        # `^(a|a)*$` against 26 a's and a '!': some 5 s of backtracking in Python's `re` here
        # (24 took 1.3 s), so the bounds below can leave a loaded machine's pauses room.
        hostile = "a" * 26 + "!"
        fake_model.script(
            Script(
                tool_calls=[
                    call("notes__tag_note", {"title": "Plan", "tag": "b"}),
                    call("notes__tag_note", {"title": "Plan", "tag": hostile}, "call_2"),
                ]
            ),
            Script(text="Neither tag fits."),
        )
        await bot.mention("C1", "tag the plan", fake_slack)
        await bot.idle()
    finally:
        for watcher in watchers:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        await stop_bot(bot)
    assert max(gaps) < 2.0, f"the event loop stalled {max(gaps):.1f} s"
    assert waits
    assert max(waits) < 2.0, f"Slack waited {max(waits):.1f} s for an answer"
    plain, slow = tool_results(fake_model)
    assert plain["status"] == slow["status"] == "invalid_arguments"
    assert "tag: 'b' does not match '^(a|a)*$'" in plain["error"]
    assert "could not be checked against the tool's pattern" in slow["error"]
    assert "too slow" in slow["error"]
    assert fake_slack.cards("C1") == []
    assert calls(log, "tag_note") == []


def offered(model: FakeOpenAI) -> dict[str, int]:
    """The tools of the latest request, with the size of each one's schema."""
    tools = model.requests[-1].body.get("tools") or []
    return {t["function"]["name"]: len(json.dumps(t, ensure_ascii=False)) for t in tools}


async def test_oversized_tool_schemas_are_left_out_largest_first_and_the_bot_keeps_answering(
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    sqlite_url: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = stdio_server(tmp_path / "notes.jsonl", read_only_tools=["list_notes"])
    # One schema of 40,000 characters, and three that together crowd out the conversation.
    server["env"]["NOTES_BULKY"] = "giant:40000,small_bulk:3000,mid_bulk:9000,large_bulk:12000"
    bot = await mcp_bot(fake_slack, fake_model, sqlite_url, {"notes": server}, token_budget=12_000)
    try:
        fake_model.script(Script(text="Still here."))
        await bot.mention("C1", "hello", fake_slack)
        await bot.idle()
        assert [m.text for m in fake_slack.bot_messages("C1")] == ["Still here."]
    finally:
        await stop_bot(bot)
    tools = offered(fake_model)
    assert "notes__giant" not in tools
    assert "notes__large_bulk" not in tools  # the largest go first, until the rest fit
    assert "notes__mid_bulk" not in tools
    assert {"notes__small_bulk", "notes__list_notes", "notes__add_note"} <= set(tools)
    max_tool_tokens = (12_000 - 2_000) // 2
    assert sum(tools.values()) <= max_tool_tokens * CHARS_PER_TOKEN
    withheld = "countersign_tools_withheld"
    assert REGISTRY.get_sample_value(withheld, {"pack": "notes", "reason": "schema_too_large"}) == 1
    assert REGISTRY.get_sample_value(withheld, {"pack": "notes", "reason": "over_budget"}) == 2
    warning = next(r.getMessage() for r in caplog.records if "left out of model" in r.getMessage())
    assert "notes__giant (schema_too_large)" in warning
    assert "notes__large_bulk (over_budget)" in warning


async def test_huge_results_are_stored_cut_and_a_resumed_turn_still_sees_every_call(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "notes.jsonl"
    server = stdio_server(log, read_only_tools=["dump"])
    bot = await mcp_bot(
        fake_slack,
        fake_model,
        sqlite_url,
        {"notes": server},
        token_budget=8_000,
        tool_result_tokens=3_000,
    )
    try:
        dumps = [("d1", 400_000), ("d2", 60_000), ("d3", 60_000)]
        fake_model.script(
            Script(
                tool_calls=[
                    *(call("notes__dump", {"size": size}, cid) for cid, size in dumps),
                    call("notes__add_note", {"title": "Dump", "body": "read it"}, "w1"),
                ]
            ),
            Script(text="Read it and noted it."),
        )
        await bot.mention("C1", "read the dump and note it", fake_slack)
        await bot.idle()
        (card,) = fake_slack.cards("C1")
        await bot.click(card, cards.APPROVE, "UALICE", "C1")
        await bot.idle()
        async with bot.countersign.db.transaction() as session:
            stored = (await session.scalars(select(Message).where(Message.role == Role.TOOL))).all()
    finally:
        await stop_bot(bot)
    assert len(calls(log, "add_note")) == 1
    # What is stored of each result is bounded, and still says what it is.
    assert len(stored) == 4
    for message in stored:
        assert len(message.content or "") <= MAX_STORED_RESULT
        json.loads(message.content or "")
    # The resumed turn's request carries the assistant's calls and every result, cut to fit.
    messages = fake_model.requests[-1].body["messages"]
    (asked,) = [m for m in messages if m["role"] == "assistant" and m.get("tool_calls")]
    assert [c["id"] for c in asked["tool_calls"]] == ["d1", "d2", "d3", "w1"]
    results = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
    assert list(results) == ["d1", "d2", "d3", "w1"]
    for cid, _ in dumps:
        assert "line 0000000 of the dump" in results[cid]
        assert "truncated for the model" in results[cid]
    # the notes server's answer to the write is its words: data in the prompt
    assert json.loads(unwrapped(results["w1"]))["status"] == "succeeded"
