"""Load benchmark: conversations and approval clicks at once, on real bot processes.

    uv run python -m bench.load                       # one process (SQLite), then 3 replicas
    uv run python -m bench.load --seconds 20 --only one

For SECONDS: CONVERSATIONS conversations each mention the bot in their own channel, wait for
the complete reply and mention it again in the thread, while CLICKS approval clicks a second
land on seeded proposals (each with a real card in the fake Slack, no paused turn), every click
sent twice (a repeated delivery). Everything goes over signed HTTP to `countersign serve`
processes, as Slack would send it; with replicas, requests are spread round-robin and the
processes share PostgreSQL and Redis. The fake Slack enforces 50 chat.update a minute for the
workspace, the real budget: every reply needs at least one edit (its final text) and every
decided card one, so replies completed per minute are bounded by that budget (the physical
limit printed below). After the load stops, in-flight replies get DRAIN seconds to finish.

Figures: acknowledgement latency p50/p99 over every request (target p99 < 100 ms), replies
completed, approvals accepted vs executions started vs tasks created (must be equal, none
twice), non-2xx answers and ERROR log lines (target 0), peak RSS of each process.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from sqlalchemy import func, select

from bench.load_traffic import click, reply_done, seed, signed_event
from bench.processes import (
    bot_env,
    bucket_quantile,
    pct,
    scrape,
    start_processes,
    stop_processes,
)
from bot.db.models import AuditEntry, Proposal, Task
from bot.db.session import Database
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import BOT_USER_ID, FakeSlack, Limit
from tests.harness import SlackFront
from tests.pg import temporary_database

REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/14")
RAMP = 2.0


@dataclass
class Figures:
    acks: list[float] = field(default_factory=list)
    client_lag: list[float] = field(default_factory=list)
    failures: int = 0
    sent: int = 0
    completed: int = 0
    clicks: int = 0


async def timed(figures: Figures, request: object) -> int:
    started = time.monotonic()
    status, _ = await request  # type: ignore[misc]
    figures.acks.append((time.monotonic() - started) * 1000)

    if status != 200:
        figures.failures += 1
    return int(status)


async def sample_lag(figures: Figures) -> None:
    while True:
        asked = time.perf_counter()
        await asyncio.sleep(0.25)
        figures.client_lag.append((time.perf_counter() - asked - 0.25) * 1000)


async def run(
    label: str,
    replicas: int,
    database_url: str,
    redis_url: str | None,
    seconds: float,
    conversations: int,
    clicks_per_second: int,
    drain: float,
) -> None:
    slack, model = FakeSlack().start(), FakeOpenAI().start()
    slack.limits["chat.update"] = Limit(50, 60.0)
    slack.limits["chat.postMessage"] = Limit(60, 60.0, per_channel=True)
    model.default = Script(
        text=" ".join(f"w{i}" for i in range(40)), time_to_first_token=0.3, tokens_per_second=40
    )
    figures = Figures()
    catch_up = float("nan")
    texts: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        env = bot_env(slack, model, database_url, redis_url)
        processes = await start_processes(replicas, env, Path(tmp))
        db = Database.from_url(database_url)
        try:
            ids = await seed(db, slack, int(seconds * clicks_per_second))
            async with AsyncExitStack() as stack:
                session = await stack.enter_async_context(aiohttp.ClientSession())
                fronts = [SlackFront(f"http://127.0.0.1:{port}", session) for _, port in processes]
                turn = 0

                def front() -> SlackFront:
                    nonlocal turn
                    turn += 1
                    return fronts[turn % len(fronts)]

                stop_at = time.monotonic() + seconds

                async def conversation(n: int) -> None:
                    channel, root = f"CL{n:04d}", None
                    asked = 0
                    # The conversations start over the first RAMP seconds (100 first mentions a
                    # second), not all within the same millisecond.
                    await asyncio.sleep(RAMP * n / conversations)
                    while time.monotonic() < stop_at:
                        text = f"<@{BOT_USER_ID}> question {asked}"
                        ts = slack.add_user_message(channel, text, thread_ts=root)
                        root = root or ts
                        mention = {"type": "app_mention", "user": "UALICE", "text": text}
                        mention |= {"ts": ts, "channel": channel, "thread_ts": root}
                        body = front()
                        await timed(figures, signed_event(body, mention))
                        asked += 1
                        figures.sent += 1
                        while time.monotonic() < stop_at + drain and not reply_done(
                            slack, channel, asked
                        ):
                            await asyncio.sleep(0.25)
                        if reply_done(slack, channel, asked):
                            figures.completed += 1
                        else:
                            return

                async def clicker() -> None:
                    for i, proposal_id in enumerate(ids):
                        due = stop_at - seconds + i / clicks_per_second
                        await asyncio.sleep(max(0.0, due - time.monotonic()))
                        for _ in range(2):  # Slack delivering the click twice
                            asyncio.get_running_loop().create_task(
                                timed(figures, click(front(), proposal_id))
                            )
                        figures.clicks += 1

                lag = asyncio.get_running_loop().create_task(sample_lag(figures))
                await asyncio.gather(*(conversation(n) for n in range(conversations)), clicker())
                lag.cancel()
                # Decisions queue when they arrive faster than the database takes them: wait
                # (at most DRAIN seconds more) until every approval has run.
                load_ended = time.monotonic()
                while time.monotonic() - load_ended < drain:
                    async with db.transaction() as dbs:
                        waiting = await dbs.scalar(
                            select(func.count())
                            .select_from(Proposal)
                            .where(Proposal.state.in_(["approved", "executing"]))
                        )
                    if not waiting:
                        catch_up = time.monotonic() - load_ended
                        break
                    await asyncio.sleep(0.5)
            async with db.transaction() as dbs:
                tasks = int(await dbs.scalar(select(func.count()).select_from(Task)) or 0)
                starts = (
                    await dbs.execute(
                        select(AuditEntry.proposal_id, func.count())
                        .where(AuditEntry.event == "start")
                        .group_by(AuditEntry.proposal_id)
                    )
                ).all()
                approved = int(
                    await dbs.scalar(
                        select(func.count())
                        .select_from(AuditEntry)
                        .where(AuditEntry.event == "approve")
                    )
                    or 0
                )
            texts = await scrape([port for _, port in processes])
        finally:
            rss, lines = stop_processes(processes, Path(tmp))
            errors = len(lines)
            for line in sorted({line.split(" ERROR ", 1)[1][:160] for line in lines})[:5]:
                print("  ERROR", line)
            await db.dispose()
    slack.stop()
    model.stop()
    twice = sum(1 for _, n in starts if n > 1)
    print(
        f"\n== {label}: {conversations} conversations + {clicks_per_second} clicks/s "
        f"(each sent twice) for {seconds:.0f} s"
    )
    print(f"  requests acknowledged              {len(figures.acks)}")
    print(
        f"  ack latency                        p50 {pct(figures.acks, 0.5):6.1f} ms"
        f"   p99 {pct(figures.acks, 0.99):6.1f} ms   (target p99 < 100 ms)"
    )
    print(
        "  ack inside the bots (histogram)    "
        f"p50 <= {bucket_quantile(texts, 'countersign_slack_ack_seconds', 0.5):.0f} ms"
        f"   p99 <= {bucket_quantile(texts, 'countersign_slack_ack_seconds', 0.99):.0f} ms"
    )
    print(
        "  event-loop lag, bots / generator   "
        f"p99 <= {bucket_quantile(texts, 'countersign_event_loop_lag_seconds', 0.99):.0f} ms"
        f" / p99 {pct(figures.client_lag, 0.99):.0f} ms"
    )
    print(
        f"  replies completed / asked          {figures.completed} / {figures.sent}"
        f"   (limit: 50 chat.update/min shared with card edits, "
        f"{seconds + drain:.0f} s -> at most {int(50 * (seconds + drain) / 60)} final edits)"
    )
    print(
        f"  approvals / executions / tasks     {approved} / {len(starts)} / {tasks}"
        f"   (clicks {figures.clicks}; executed twice: {twice})"
    )
    print(
        f"  executions caught up with clicks   {catch_up:.1f} s after the load stopped"
        if catch_up == catch_up
        else f"  executions caught up with clicks   not within {drain:.0f} s (still queued)"
    )
    print(f"  non-2xx answers, ERROR log lines   {figures.failures}, {errors}   (target 0, 0)")
    print("  peak RSS per process               " + ", ".join(f"{r:.0f} MB" for r in rss))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--clicks", type=int, default=50)
    parser.add_argument("--drain", type=float, default=60)
    parser.add_argument("--only", choices=["one", "replicas"], default=None)
    args = parser.parse_args()
    common = (args.seconds, args.conversations, args.clicks, args.drain)
    if args.only in (None, "one"):
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite:///{Path(tmp) / 'load.db'}"
            await run("one process, SQLite", 1, url, None, *common)
    if args.only in (None, "replicas"):
        from redis.asyncio import Redis

        redis = Redis.from_url(REDIS_URL)
        await redis.flushdb()
        await redis.aclose()
        async with temporary_database("cs_load") as url:
            await run("three replicas, PostgreSQL + Redis", 3, url, REDIS_URL, *common)


if __name__ == "__main__":
    asyncio.run(main())
