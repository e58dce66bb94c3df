"""MCP servers as tool packs, through the front door: real servers written with the `mcp` SDK
(stdio, started by the bot; Streamable HTTP, a process the test kills and restarts), the real
`mcp` client inside the bot, a mention, a card, a click."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from bot.slack import cards
from tests.card_reading import card_fields
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import DEFAULT_MEMBERS, FakeSlack
from tests.harness import RunningBot, make_settings, start_bot, stop_bot
from tests.mcp_helpers import HttpNotes, calls, stdio_server, until
from tests.test_approvals_flow import call, card_text, proposals, tool_results


async def mcp_bot(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, url: str, servers: dict[str, Any], **extra: Any
) -> RunningBot:
    return await start_bot(
        make_settings(
            fake_slack,
            fake_model,
            url,
            mcp_servers={"mcpServers": servers},
            mcp_check_seconds=0.2,
            **extra,
        )
    )


@pytest.fixture
async def stdio_bot(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, tmp_path: Path
) -> AsyncIterator[RunningBot]:
    log = tmp_path / "notes.jsonl"
    server = stdio_server(log, read_only_tools=["list_notes"])
    running = await mcp_bot(fake_slack, fake_model, sqlite_url, {"notes": server})
    yield running
    await stop_bot(running)


def offered(model: FakeOpenAI, request: int = -1) -> list[str]:
    return [t["function"]["name"] for t in model.requests[request].body.get("tools") or []]


async def test_a_marked_read_only_tool_runs_at_once_and_an_unmarked_one_needs_a_card(
    stdio_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI, tmp_path: Path
) -> None:
    log = tmp_path / "notes.jsonl"
    fake_model.script(
        Script(tool_calls=[call("notes__list_notes", {})]),
        Script(tool_calls=[call("notes__count_notes", {}, "c2")]),
        Script(text="Counted."),
    )
    await stdio_bot.mention("C1", "what notes are there?", fake_slack)
    await stdio_bot.idle()
    assert {"notes__list_notes", "notes__add_note", "notes__count_notes"} <= set(
        offered(fake_model, 0)
    )
    # list_notes ran at once (the operator marked it); count_notes says readOnlyHint but the
    # server is not trusted, so it waits for a person.
    assert [c["tool"] for c in calls(log)] == ["list_notes"]
    assert REGISTRY.get_sample_value(
        "countersign_tool_reads_total", {"pack": "notes", "outcome": "ok"}
    )
    (result,) = tool_results(fake_model)
    assert result["content"] == ["[]"]
    (card,) = fake_slack.cards("C1")
    assert "count_notes" in card_text(card) or "How many notes" in card_text(card)


def shown(text: str) -> str:
    """`text` as it appears inside `card_text` (JSON-encoded blocks)."""
    return json.dumps(text, ensure_ascii=False)[1:-1]


async def test_an_mcp_write_card_shows_every_argument_and_runs_once_with_the_key_in_meta(
    stdio_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI, tmp_path: Path
) -> None:
    log = tmp_path / "notes.jsonl"
    title = "Quarterly planning: Zoë's room 4.2, then lunch at 12:30 (bring laptops)"
    # Long and different everywhere, so a cut anywhere would show.
    body = "".join(
        f"Paragraph {i:03d}: the plan for week {i % 13} is step {i * 7} of {i * 11 + 5}.\n"
        for i in range(120)
    )
    assert len(body) > 6_000
    fake_model.script(
        Script(tool_calls=[call("notes__add_note", {"title": title, "body": body})]),
        Script(text="Added."),
    )
    await stdio_bot.mention("C1", "note the planning", fake_slack)
    await stdio_bot.idle()
    (card,) = fake_slack.cards("C1")
    text = card_text(card)
    assert "Add a note on the MCP server notes" in text
    assert "Current state unknown" in text
    assert shown(title) in text  # a short value: every character, as sent
    # A long value is never cut silently: its start and its full length are on the card.
    assert shown(body[:300]) in text
    assert shown(body) in text or str(len(body)) in text or f"{len(body):,}" in text
    assert calls(log, "add_note") == []  # nothing before the click
    assert await stdio_bot.click(card, cards.APPROVE, "UALICE", "C1") == 200
    await stdio_bot.idle()
    (proposal,) = await proposals(stdio_bot)
    assert proposal.state.value == "succeeded"
    (made,) = calls(log, "add_note")
    assert made["arguments"] == {"title": title, "body": body}
    assert made["key"] == proposal.idempotency_key
    # A second click on the settled card changes nothing and writes nothing.
    await stdio_bot.click_value(proposal.id, cards.APPROVE, "UALICE", "C1", fake_slack)
    await stdio_bot.idle()
    assert len(calls(log, "add_note")) == 1
    (result,) = tool_results(fake_model)
    assert result["status"] == "succeeded"


async def test_invalid_mcp_arguments_are_told_to_the_model_without_a_card(
    stdio_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI, tmp_path: Path
) -> None:
    fake_model.script(
        Script(tool_calls=[call("notes__add_note", {"title": 3})]),
        Script(text="Let me fix that."),
    )
    await stdio_bot.mention("C1", "note something", fake_slack)
    await stdio_bot.idle()
    assert fake_slack.cards("C1") == []
    (result,) = tool_results(fake_model)
    assert result["status"] == "invalid_arguments"
    assert "title: 3 is not of type 'string'" in result["error"]
    assert "'body' is a required property" in result["error"]
    assert calls(tmp_path / "notes.jsonl") == []


async def test_an_is_error_result_fails_the_action_with_the_servers_message(
    stdio_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Script(tool_calls=[call("notes__archive", {})]), Script(text="It failed."))
    await stdio_bot.mention("C1", "archive the notebook", fake_slack)
    await stdio_bot.idle()
    (card,) = fake_slack.cards("C1")
    await stdio_bot.click(card, cards.APPROVE, "UALICE", "C1")
    await stdio_bot.idle()
    (proposal,) = await proposals(stdio_bot)
    assert proposal.state.value == "failed"
    assert "the archive is read-only today" in (proposal.error or "")
    assert "the archive is read-only today" in card_text(fake_slack.cards("C1")[0])


async def test_a_tool_without_annotations_is_destructive_and_a_strangers_click_does_nothing(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "notes.jsonl"
    fake_slack.members["C1"] = [*DEFAULT_MEMBERS, "UBOSS"]  # the approver reads the thread
    bot = await mcp_bot(
        fake_slack,
        fake_model,
        sqlite_url,
        {"notes": stdio_server(log)},
        approval_policies={"notes": {"approvers": ["UBOSS"]}},  # the server as a pack
    )
    try:
        fake_model.script(
            Script(tool_calls=[call("notes__delete_note", {"title": "Standup"})]),
            Script(text="Deleted."),
        )
        await bot.mention("C1", "delete the standup note", fake_slack)
        await bot.idle()
        (card,) = fake_slack.cards("C1")
        approve = next(
            e
            for b in card.blocks or []
            if b.get("type") == "actions"
            for e in b["elements"]
            if e["action_id"] == cards.APPROVE
        )
        assert approve.get("confirm"), "a destructive MCP tool asks for confirmation"
        await bot.click(card, cards.APPROVE, "UMALLORY", "C1")
        await bot.idle()
        assert calls(log, "delete_note") == []
        (proposal,) = await proposals(bot)
        assert proposal.state.value == "proposed"
        await bot.click(fake_slack.cards("C1")[0], cards.APPROVE, "UBOSS", "C1")
        await bot.idle()
        assert [c["arguments"] for c in calls(log, "delete_note")] == [{"title": "Standup"}]
    finally:
        await stop_bot(bot)


async def test_trusted_annotations_let_a_read_only_hint_run_and_allowed_tools_hide_the_rest(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "notes.jsonl"
    server = stdio_server(log, trust_annotations=True, allowed_tools=["count_notes", "add_note"])
    bot = await mcp_bot(fake_slack, fake_model, sqlite_url, {"notes": server})
    try:
        fake_model.script(
            Script(tool_calls=[call("notes__count_notes", {})]), Script(text="None yet.")
        )
        await bot.mention("C1", "how many notes?", fake_slack)
        await bot.idle()
        mcp_tools = [n for n in offered(fake_model, 0) if n.startswith("notes__")]
        assert sorted(mcp_tools) == ["notes__add_note", "notes__count_notes"]
        assert fake_slack.cards("C1") == []
        assert [c["tool"] for c in calls(log)] == ["count_notes"]
    finally:
        await stop_bot(bot)


async def test_a_killed_http_server_withholds_its_tools_and_they_return_after_restart(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, tmp_path: Path
) -> None:
    notes = await HttpNotes(tmp_path / "notes.jsonl").start()
    bot = await mcp_bot(
        fake_slack, fake_model, sqlite_url, {"web": notes.config(read_only_tools=["list_notes"])}
    )
    hub = bot.countersign.integrations.mcp
    assert hub is not None
    try:
        fake_model.script(Script(text="Hello."))
        await bot.mention("C1", "hi", fake_slack)
        await bot.idle()
        assert "web__list_notes" in offered(fake_model)

        up = {"server": "web"}
        assert REGISTRY.get_sample_value("countersign_mcp_server_up", up) == 1
        notes.kill()
        await until(lambda: not hub.connections["web"].up)
        assert REGISTRY.get_sample_value("countersign_mcp_server_up", up) == 0
        # The model still remembers the tool and calls it: it is told plainly, nothing hangs.
        fake_model.script(
            Script(tool_calls=[call("web__list_notes", {})]),
            Script(text="The notes server is down right now."),
        )
        await bot.mention("C1", "list the notes again", fake_slack)
        await bot.idle()
        assert "web__list_notes" not in offered(fake_model)
        system = fake_model.requests[-1].body["messages"][0]["content"]
        assert "The tool server web (MCP) is not reachable right now" in system
        (result,) = tool_results(fake_model)[-1:]
        assert result["status"] == "error"
        assert "the MCP server web is not reachable right now" in result["error"]

        await notes.start()
        await until(lambda: hub.connections["web"].up)
        fake_model.script(Script(tool_calls=[call("web__list_notes", {})]), Script(text="[]"))
        await bot.mention("C1", "and now?", fake_slack)
        await bot.idle()
        assert "web__list_notes" in offered(fake_model)
        assert tool_results(fake_model)[-1]["content"] == ["[]"]
        assert "not reachable" not in fake_model.requests[-1].body["messages"][0]["content"]
    finally:
        notes.kill()
        await stop_bot(bot)


async def test_a_tool_changed_between_card_and_click_is_stale_and_nothing_runs(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "notes.jsonl"
    notes = await HttpNotes(log).start("v1")
    bot = await mcp_bot(fake_slack, fake_model, sqlite_url, {"web": notes.config()})
    hub = bot.countersign.integrations.mcp
    assert hub is not None
    try:
        fake_model.script(
            Script(tool_calls=[call("web__add_note", {"title": "Plan", "body": "Q1"})]),
            Script(text="It changed; I'll ask again."),
        )
        await bot.mention("C1", "note the plan", fake_slack)
        await bot.idle()
        (card,) = fake_slack.cards("C1")
        notes.kill()
        await until(lambda: not hub.connections["web"].up)
        await notes.start("v2")  # the same server, its add_note now takes tags
        await until(lambda: hub.connections["web"].up)
        await bot.click(card, cards.APPROVE, "UALICE", "C1")
        await bot.idle()
        (proposal,) = await proposals(bot)
        assert proposal.state.value == "failed"
        # The approved arguments still fit; the definition's hash is what moved.
        assert "stale: the MCP server web changed the tool add_note" in (proposal.error or "")
        assert calls(log, "add_note") == []
    finally:
        notes.kill()
        await stop_bot(bot)


async def test_a_stdio_server_stops_with_the_bot(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, tmp_path: Path
) -> None:
    bot = await mcp_bot(
        fake_slack, fake_model, sqlite_url, {"notes": stdio_server(tmp_path / "n.jsonl")}
    )
    hub = bot.countersign.integrations.mcp
    assert hub is not None
    assert hub.connections["notes"].up
    status = {row.name: row for row in hub.status()}["notes"]
    assert (status.up, status.reads, status.writes) == (True, 0, 10)
    assert server_processes(), "the bot started its stdio server"
    await stop_bot(bot)
    await until(lambda: not server_processes(), timeout=10)


def server_processes() -> list[int]:
    """Live children of this test process running the notebook server (read from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        parent, state = int(stat[1]), stat[0]
        if parent == os.getpid() and state != "Z" and "tests.mcp_servers.notes stdio" in cmdline:
            found.append(int(entry.name))
    return found


async def test_a_killed_stdio_server_is_started_again_by_the_bot(
    stdio_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    hub = stdio_bot.countersign.integrations.mcp
    assert hub is not None
    (pid,) = server_processes()
    os.kill(pid, signal.SIGKILL)
    await until(lambda: not hub.connections["notes"].up)
    await until(lambda: hub.connections["notes"].up)
    (again,) = server_processes()
    assert again != pid
    fake_model.script(Script(tool_calls=[call("notes__list_notes", {})]), Script(text="None."))
    await stdio_bot.mention("C1", "any notes?", fake_slack)
    await stdio_bot.idle()
    assert tool_results(fake_model)[-1]["content"] == ["[]"]


async def test_an_mcp_card_can_be_edited_field_by_field_from_the_tools_schema(
    stdio_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI, tmp_path: Path
) -> None:
    fake_model.script(
        Script(tool_calls=[call("notes__add_note", {"title": "Standup", "body": "at 10"})]),
        Script(text="Added."),
    )
    await stdio_bot.mention("C1", "note the standup", fake_slack)
    await stdio_bot.idle()
    (card,) = fake_slack.cards("C1")
    await stdio_bot.click(card, cards.EDIT, "UALICE", "C1")
    await stdio_bot.idle()
    modal = fake_slack.views[-1]["view"]
    assert [b["block_id"] for b in modal["blocks"]] == ["title", "body"]
    status, _ = await stdio_bot.submit_view(
        modal, "UALICE", {"title": "Standup", "body": "at 9:30"}
    )
    assert status == 200
    await stdio_bot.idle()
    card = fake_slack.cards("C1")[0]
    assert card_fields(card)["Body"] == "at 9:30"
    await stdio_bot.click(card, cards.APPROVE, "UALICE", "C1")
    await stdio_bot.idle()
    (made,) = calls(tmp_path / "notes.jsonl", "add_note")
    assert made["arguments"] == {"title": "Standup", "body": "at 9:30"}


async def test_a_hanging_mcp_tool_times_out_in_words_and_the_server_stays_usable(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "notes.jsonl"
    server = stdio_server(log, read_only_tools=["stall", "list_notes"], timeout_seconds=1)
    bot = await mcp_bot(fake_slack, fake_model, sqlite_url, {"notes": server})
    try:
        fake_model.script(
            Script(tool_calls=[call("notes__stall", {"seconds": 30})]),
            Script(tool_calls=[call("notes__list_notes", {}, "c2")]),
            Script(text="It hung; the rest works."),
        )
        started = time.monotonic()
        await bot.mention("C1", "think hard", fake_slack)
        await bot.idle()
        assert time.monotonic() - started < 10
        hung, listed = tool_results(fake_model)
        assert hung["status"] == "error"
        assert "the MCP server notes" in hung["error"]
        assert listed["content"] == ["[]"]
    finally:
        await stop_bot(bot)
