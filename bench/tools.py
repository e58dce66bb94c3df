"""Tool-call overhead benchmark: what Countersign adds around a GitHub, Linear or MCP call, with
the fake servers answering at once.

    uv run python -m bench.tools                    # every part
    uv run python -m bench.tools --reads 200 --clicks 20

1. Read round trip: one read call through `prepare_calls` (what a model round does: parse and
   validate the arguments, run the tool, report the step, shape the result), against the same
   request made with a plain client (httpx2 for GitHub and Linear; for MCP the connection's
   `mcp` SDK session without the tool layer over stdio, a separate `mcp` Client over HTTP),
   interleaved in one run.
2. Click -> write started: a mention makes the fake model propose a write, the card is
   clicked, and we time the click to the moment the fake service receives the write (which
   includes the authorisation, the compare-and-set claim and the stale re-read).
3. MCP start-up: from starting a server to its first tool listing (stdio spawns a Python
   process; HTTP connects to one already running).
4. Memory: the bot process's RSS growth and the children's RSS with 5 stdio MCP servers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from bot.conversation.tool_calls import prepare_calls
from bot.llm import ToolCall
from bot.slack import cards
from bot.tools.catalog import ToolRegistry
from bot.tools.integration_settings import IntegrationSettings
from bot.tools.integrations import Integrations
from bot.tools.mcp.hub import McpHub
from bot.tools.registry import ToolContext
from tests.fakes.github import TOKEN, FakeGitHub
from tests.fakes.linear import API_KEY, FakeLinear
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack
from tests.harness import make_settings, start_bot, stop_bot
from tests.mcp_helpers import HttpNotes, calls, stdio_server
from tests.test_approvals_flow import call


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def line(label: str, values: list[float]) -> str:
    return f"  {label:<44} p50 {pct(values, 0.5):7.2f} ms   p95 {pct(values, 0.95):7.2f} ms"


async def paired(
    n: int, ours: Callable[[], Awaitable[Any]], bare: Callable[[], Awaitable[Any]]
) -> tuple[list[float], list[float]]:
    """Both steps n times, interleaved (alternating which goes first), so drift on the fake's
    side (a growing log, a warming cache) weighs on both alike."""
    await ours()  # warm: connections, imports
    await bare()
    times: tuple[list[float], list[float]] = ([], [])
    for i in range(n):
        order = [(0, ours), (1, bare)] if i % 2 == 0 else [(1, bare), (0, ours)]
        for slot, step in order:
            started = time.perf_counter()
            await step()
            times[slot].append((time.perf_counter() - started) * 1000)
    return times


def no_context() -> ToolContext:
    return ToolContext(db=None, slack=None, team_id="T", channel_id="C", requester="U")  # type: ignore[arg-type]


async def through_countersign(registry: ToolRegistry, name: str, arguments: dict[str, Any]) -> None:
    (done,) = await prepare_calls(
        [ToolCall("c1", name, json.dumps(arguments))],
        registry,
        no_context,
        lambda *_: None,
        timeout=30,
    )
    assert done.result is not None
    assert done.result.get("status") != "error", done.result


async def reads(n: int, tmp: Path) -> None:
    github, linear = FakeGitHub().start(), FakeLinear().start()
    github.add_issue("acme/api", 7, "Login loops", labels=["bug"])
    linear.add_issue("ENG", "Checkout button frozen")
    notes = await HttpNotes(tmp / "http.jsonl").start()
    settings = IntegrationSettings(
        _env_file=None,
        github_token=TOKEN,
        github_api_url=github.api_url,
        linear_api_key=API_KEY,
        linear_api_url=linear.api_url,
        mcp_servers={
            "mcpServers": {
                "stdio": stdio_server(tmp / "stdio.jsonl", read_only_tools=["list_notes"]),
                "web": notes.config(read_only_tools=["list_notes"]),
            }
        },
    )
    registry = ToolRegistry()
    integrations = Integrations.attach(registry, settings)
    await integrations.start()
    print(f"\n== read round trip, {n} calls each (fakes answer at once)")
    try:
        cases: list[tuple[str, str, dict[str, Any], Callable[[], Awaitable[Any]]]] = []
        raw_github = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"})
        raw_linear = httpx2.AsyncClient(headers={"Authorization": API_KEY})
        from bot.tools.packs.linear.client import DOCUMENTS

        async def github_bare() -> None:
            (await raw_github.get(f"{github.api_url}/repos/acme/api/labels")).raise_for_status()

        async def linear_bare() -> None:
            body = {"query": DOCUMENTS["Teams"], "operationName": "Teams", "variables": {}}
            (await raw_linear.post(linear.api_url, json=body)).raise_for_status()

        hub = integrations.mcp
        assert hub is not None

        async def stdio_bare() -> None:
            await hub.connections["stdio"].call("list_notes", {}, None)

        async with Client(streamable_http_client(notes.url)) as bare_http:

            async def http_bare() -> None:
                await bare_http.call_tool("list_notes", {})

            cases = [
                ("GitHub list labels", "github_list_labels", {"repo": "acme/api"}, github_bare),
                ("Linear list teams", "linear_list_teams", {}, linear_bare),
                ("MCP stdio tool", "stdio__list_notes", {}, stdio_bare),
                ("MCP HTTP tool", "web__list_notes", {}, http_bare),
            ]
            for label, name, arguments, bare in cases:
                ours, theirs = await paired(
                    n, partial(through_countersign, registry, name, arguments), bare
                )
                print(line(f"{label}: through Countersign ({name})", ours))
                print(line(f"{label}: the client call alone", theirs))
                extra = statistics.median(ours) - statistics.median(theirs)
                print(f"  {'':<44} overhead at p50 {extra:+.2f} ms")
        await raw_github.aclose()
        await raw_linear.aclose()
    finally:
        await integrations.close()
        notes.kill()
        github.stop()
        linear.stop()


async def clicks(n: int, tmp: Path) -> None:
    slack, model = FakeSlack().start(), FakeOpenAI().start()
    github, linear = FakeGitHub().start(), FakeLinear().start()
    github.add_issue("acme/api", 7, "Login loops", labels=["bug"])
    linear.add_issue("ENG", "Checkout button frozen")
    log = tmp / "click.jsonl"
    bot = await start_bot(
        make_settings(
            slack,
            model,
            f"sqlite:///{tmp / 'b.db'}",
            slack_edit_budget_per_minute=600,
            github_token=TOKEN,
            github_api_url=github.api_url,
            linear_api_key=API_KEY,
            linear_api_url=linear.api_url,
            mcp_servers={"mcpServers": {"notes": stdio_server(log)}},
        )
    )
    figures: dict[str, list[float]] = {"GitHub": [], "Linear": [], "MCP stdio": []}
    try:
        for i in range(n):
            for kind, name, arguments in (
                ("GitHub", "github_comment", {"repo": "acme/api", "number": 7, "body": f"c{i}"}),
                ("Linear", "linear_comment", {"issue": "ENG-1", "body": f"c{i}"}),
                ("MCP stdio", "notes__add_note", {"title": f"t{i}", "body": "b"}),
            ):
                channel = f"C{kind[:3]}{i}"
                model.script(Script(tool_calls=[call(name, arguments)]), Script(text="ok"))
                await bot.mention(channel, "please", slack)
                await bot.idle()
                (card,) = slack.cards(channel)
                clicked_wall, clicked = time.time(), time.monotonic()
                await bot.click(card, cards.APPROVE, "UALICE", channel)
                await bot.idle()
                if kind == "GitHub":
                    started = github.writes()[-1].at - clicked
                elif kind == "Linear":
                    started = linear.mutations()[-1].at - clicked
                else:
                    started = calls(log, "add_note")[-1]["at"] - clicked_wall
                figures[kind].append(started * 1000)
    finally:
        await stop_bot(bot)
        for fake in (slack, model, github, linear):
            fake.stop()
    print(f"\n== click -> write started, {n} approvals each (SQLite, fakes)")
    for kind, values in figures.items():
        print(line(kind, values))


def rss_kb(pid: int | str = "self") -> int:
    for row in Path(f"/proc/{pid}/status").read_text().splitlines():
        if row.startswith("VmRSS:"):
            return int(row.split()[1])
    return 0


def children_rss_kb() -> int:
    import os

    total = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                if parent == os.getpid():
                    total += rss_kb(entry.name)
            except (OSError, IndexError, ValueError):
                continue
    return total


async def startup_and_memory(tmp: Path) -> None:
    notes = await HttpNotes(tmp / "h.jsonl").start()
    print("\n== MCP start-up (start -> first tool listing), 5 runs each")
    for label, config in (
        ("stdio (spawns python)", stdio_server(tmp / "s.jsonl")),
        ("Streamable HTTP", notes.config()),
    ):
        seconds = []
        for _ in range(5):
            hub = McpHub(_servers({"one": config}))
            started = time.perf_counter()
            await hub.start(wait=30)
            assert hub.connections["one"].up
            seconds.append((time.perf_counter() - started) * 1000)
            await hub.close()
        print(f"  {label:<44} p50 {pct(seconds, 0.5):7.1f} ms   max {max(seconds):7.1f} ms")
    notes.kill()

    before = rss_kb()
    hub = McpHub(_servers({f"s{i}": stdio_server(tmp / f"m{i}.jsonl") for i in range(5)}))
    await hub.start(wait=60)
    assert all(c.up for c in hub.connections.values())
    grown, children = rss_kb() - before, children_rss_kb()
    await hub.close()
    print("\n== memory with 5 stdio MCP servers connected")
    print(f"  bot process RSS growth (modules loaded)       {grown / 1024:7.1f} MiB")
    print(f"  the 5 server processes (RSS, sum)             {children / 1024:7.1f} MiB")


def _servers(raw: dict[str, Any]) -> Any:
    return IntegrationSettings(_env_file=None, mcp_servers={"mcpServers": raw}).mcp_servers


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reads", type=int, default=100)
    parser.add_argument("--clicks", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        await reads(args.reads, Path(tmp))
        await clicks(args.clicks, Path(tmp))
        await startup_and_memory(Path(tmp))


if __name__ == "__main__":
    asyncio.run(main())
