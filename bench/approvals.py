"""Approval benchmark.

    uv run python -m bench.approvals                 # both parts, SQLite and PostgreSQL
    uv run python -m bench.approvals --proposals 200 --no-postgres

Part 1, end to end against the fakes (SQLite): a mention makes the model call create_task, the
card is clicked, and we time click -> card shows "executing" and click -> first text of the
resumed reply visible (the fake model answers with no delay and the edit budget is set to
600/min, so this is Countersign's own overhead: authorise, compare-and-set, execute, outbox,
resume, stream).

Part 1b, the same clicks with the workspace's `chat.update` window spent (the real budget,
50/min, every slot taken): click -> the tool started (its `start` audit row). Execution never
waits for the card's cosmetic edit, so this stays in milliseconds (target p95 < 150 ms).

Part 2, the decision path alone: N proposals decided at once, each clicked twice (a repeated
delivery), executed with the real `create_task` tool; decisions per second and how many writes
ran more than once (must be zero).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy import func, select

from bot.approvals.executor import Executor
from bot.approvals.service import AlreadyHandled, ApprovalsService
from bot.db import repositories as repo
from bot.db.migrate import upgrade_to_head
from bot.db.models import AuditEntry, Proposal, Role, Task
from bot.db.session import Database
from bot.slack import cards
from bot.tools.catalog import ToolRegistry
from bot.tools.packs.tasks import CreateTask
from bot.tools.registry import Preview, ToolContext
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack
from tests.harness import make_settings, start_bot, stop_bot
from tests.pg import temporary_database
from tests.test_approvals_flow import CREATE, call


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def end_to_end(rounds: int) -> None:
    slack, model = FakeSlack().start(), FakeOpenAI().start()
    to_executing: list[float] = []
    to_resumed: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        # A roomy edit budget: this part times processing, not queueing for chat.update
        # (bench/stream.py measures the budget).
        bot = await start_bot(
            make_settings(
                slack, model, f"sqlite:///{Path(tmp) / 'b.db'}", slack_edit_budget_per_minute=600
            )
        )
        try:
            for i in range(rounds):
                channel = f"C{i:03d}"
                model.script(
                    Script(tool_calls=[call("create_task", CREATE)]), Script(text=f"Resumed {i}.")
                )
                await bot.mention(channel, "track it", slack)
                await bot.idle()
                (card,) = slack.cards(channel)
                clicked = time.monotonic()
                await bot.click(card, cards.APPROVE, "UALICE", channel)
                await bot.idle()
                executing = next(t for t, text in slack.timeline[card.ts] if "executing" in text)
                resumed = slack.bot_messages(channel)[-1]
                first_text = next(
                    t for t, text in slack.timeline[resumed.ts] if not text.startswith("_Thinking")
                )
                to_executing.append((executing - clicked) * 1000)
                to_resumed.append((first_text - clicked) * 1000)
        finally:
            await stop_bot(bot)
    slack.stop()
    model.stop()
    print(f"\n== end to end, {rounds} approvals one after another (SQLite, fakes)")
    print(
        f"  click -> card shows executing      p50 {pct(to_executing, 0.5):7.1f} ms"
        f"   p95 {pct(to_executing, 0.95):7.1f} ms"
    )
    print(
        f"  click -> resumed reply visible     p50 {pct(to_resumed, 0.5):7.1f} ms"
        f"   p95 {pct(to_resumed, 0.95):7.1f} ms"
    )


class NullCards:
    """The decision path alone: no Slack in the loop."""

    def refresh(self, proposal_id: int) -> None:
        return None


async def decisions(database_url: str, count: int, label: str) -> None:
    db = Database.from_url(database_url)
    await upgrade_to_head(db)
    approvals = ApprovalsService(db)
    registry = ToolRegistry.from_packs(["bot.tools.packs.tasks"])
    preview = Preview("Create task 'bench'")
    ids: list[int] = []
    async with db.transaction() as session:
        for i in range(count):
            conversation, _ = await repo.get_or_create_conversation(
                session, "T", "C", f"{i}.0", "UALICE"
            )
            assistant = await repo.add_message(
                session,
                conversation,
                Role.ASSISTANT,
                None,
                tool_calls=[
                    {
                        "id": "c",
                        "type": "function",
                        "function": {"name": "create_task", "arguments": "{}"},
                    }
                ],
            )
            result = await repo.add_message(
                session, conversation, Role.TOOL, None, tool_call_id="c", tool_name="create_task"
            )
            arguments = CreateTask(title=f"bench {i}").model_dump(mode="json")
            proposal = await approvals.propose(
                session,
                team_id="T",
                conversation_id=conversation.id,
                assistant_message_id=assistant.id,
                result_message_id=result.id,
                tool_call_id="c",
                tool_name="create_task",
                arguments=arguments,
                preview=preview,
                requester="UALICE",
                channel_id="C",
                thread_ts=f"{i}.0",
                expires_in=timedelta(minutes=15),
            )
            ids.append(proposal.id)

    # create_task never calls Slack; a client that points nowhere makes that visible.
    unused_slack = AsyncWebClient(token="xoxb-unused", base_url="http://127.0.0.1:9/")

    def context(proposal: Proposal) -> ToolContext:
        return ToolContext(
            db=db,
            slack=unused_slack,
            team_id="T",
            channel_id="C",
            requester="UALICE",
            idempotency_key=proposal.idempotency_key,
        )

    executor = Executor(approvals, registry, NullCards(), context, lambda: None, "bench-worker")
    lost = 0

    async def click(proposal_id: int) -> None:
        nonlocal lost
        try:
            vote = await approvals.vote(proposal_id, 1, "UALICE", 1)
        except AlreadyHandled:
            lost += 1
            return
        if vote.approved_now:
            await executor.run(proposal_id)

    started = time.monotonic()
    await asyncio.gather(*[click(i) for i in ids for _ in range(2)])
    elapsed = time.monotonic() - started
    async with db.transaction() as session:
        tasks = await session.scalar(select(func.count()).select_from(Task))
        starts = await session.scalar(
            select(func.count()).select_from(AuditEntry).where(AuditEntry.event == "start")
        )
        doubled = (
            await session.execute(
                select(AuditEntry.proposal_id)
                .where(AuditEntry.event == "start")
                .group_by(AuditEntry.proposal_id)
                .having(func.count() > 1)
            )
        ).all()
    await db.dispose()
    print(f"\n== {count} proposals decided concurrently, each clicked twice ({label})")
    print(f"  wall time                           {elapsed:7.2f} s")
    print(f"  decisions (approve+execute) per s   {count / elapsed:7.1f}")
    print(f"  repeated clicks refused             {lost}")
    print(f"  tasks created / executions started  {tasks} / {starts}")
    print(f"  proposals executed more than once   {len(doubled)}")


async def window_spent(rounds: int) -> None:
    slack, model = FakeSlack().start(), FakeOpenAI().start()
    to_started: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        bot = await start_bot(make_settings(slack, model, f"sqlite:///{Path(tmp) / 'w.db'}"))
        try:
            for i in range(rounds):
                channel = f"W{i:03d}"
                model.script(Script(tool_calls=[call("create_task", CREATE)]))
                await bot.mention(channel, "track it", slack)
                while not slack.cards(channel):  # earlier edits queue for the budget: no idle()
                    await asyncio.sleep(0.005)
                (card,) = slack.cards(channel)
                window = bot.countersign.budget.window
                while (await window.take(0))[0]:  # spend every chat.update of the minute
                    pass
                clicked = time.time()
                await bot.click(card, cards.APPROVE, "UALICE", channel)
                started = None
                while started is None:
                    async with bot.countersign.db.transaction() as session:
                        started = await session.scalar(
                            select(AuditEntry.created_at)
                            .join(Proposal, Proposal.id == AuditEntry.proposal_id)
                            .where(AuditEntry.event == "start", Proposal.channel_id == channel)
                        )
                    await asyncio.sleep(0.002)
                to_started.append((started.timestamp() - clicked) * 1000)
        finally:
            await stop_bot(bot)
    slack.stop()
    model.stop()
    print(f"\n== {rounds} clicks with the chat.update window spent (50/min budget, SQLite)")
    print(
        f"  click -> tool started              p50 {pct(to_started, 0.5):7.1f} ms"
        f"   p95 {pct(to_started, 0.95):7.1f} ms   (target p95 < 150 ms)"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--proposals", type=int, default=1000)
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    await end_to_end(args.rounds)
    await window_spent(args.rounds)
    with tempfile.TemporaryDirectory() as tmp:
        await decisions(f"sqlite:///{Path(tmp) / 'd.db'}", args.proposals, "SQLite")
    if not args.no_postgres:
        async with temporary_database("cs_bench") as url:
            await decisions(url, args.proposals, "PostgreSQL")


if __name__ == "__main__":
    asyncio.run(main())
