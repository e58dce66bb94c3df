"""History benchmark: /history, /history <thread> and /approvals against a large database, and
prompt size along a long thread.

    uv run python -m bench.history                     # SQLite and PostgreSQL, 1,000,000 messages
    uv run python -m bench.history --messages 100000 --no-postgres

Seeds MESSAGES messages in MESSAGES/20 conversations for 2,000 users (bulk-loaded with the
drivers, bypassing the ORM), then runs the bot in HTTP mode against the fakes and times each
slash command from the signed request to the answer arriving at its response_url (p50, p99).
Last, it feeds one thread 500 turns and prints the prompt tokens the model receives at turns
10, 100 and 500 (flat once the token budget is reached).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sqlite3
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
from sqlalchemy.engine import make_url

from bot.conversation.memory import Budget, Memory
from bot.conversation.tokens import TokenCounter
from bot.db import repositories as repo
from bot.db.migrate import upgrade_to_head
from bot.db.models import Role
from bot.db.session import Database
from tests.fakes.openai import FakeOpenAI
from tests.fakes.slack import TEAM_ID, FakeSlack
from tests.harness import RunningBot, make_settings, start_bot, stop_bot
from tests.pg import temporary_database
from tests.test_llm_stream import llm_for

USERS = 2_000
PER_CONVERSATION = 20
PROPOSALS = 20_000


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def user(n: int) -> str:
    return f"U{n:07d}"


def rows(messages: int) -> dict[str, list[tuple[Any, ...]]]:
    """Conversations, participants, messages and proposals as plain tuples."""
    rng = random.Random(7)
    now = datetime.now(UTC)
    conversations = messages // PER_CONVERSATION
    out: dict[str, list[tuple[Any, ...]]] = {"c": [], "p": [], "m": [], "x": [], "a": []}
    message_id = 0
    for c in range(1, conversations + 1):
        starter = user(rng.randrange(USERS))
        other = user(rng.randrange(USERS))
        started = now - timedelta(minutes=rng.randrange(60 * 24 * 60))
        thread = f"{1_700_000_000 + c}.000100"
        out["c"].append(
            (
                c,
                TEAM_ID,
                f"C{c % 500:05d}",
                thread,
                starter,
                started,
                started + timedelta(minutes=30),
                PER_CONVERSATION,
                4000,
                1000,
            )
        )
        out["p"].append((c, starter))
        if other != starter:
            out["p"].append((c, other))
        for i in range(PER_CONVERSATION):
            message_id += 1
            speaker = starter if i % 4 == 0 else other
            role = "user" if i % 2 == 0 else "assistant"
            out["m"].append(
                (
                    message_id,
                    c,
                    role,
                    f"message {i} of conversation {c}: deploy notes and numbers {i * c}",
                    speaker if role == "user" else None,
                    f"{1_700_000_000 + c}.{i:06d}",
                    started + timedelta(seconds=i),
                )
            )
        if c <= PROPOSALS:
            state = "proposed" if c % 20 == 0 else "succeeded"
            out["x"].append(
                (
                    c,
                    TEAM_ID,
                    c,
                    message_id - 1,
                    message_id,
                    f"call_{c}",
                    "create_task",
                    "{}",
                    "h" * 64,
                    f"Create task {c}",
                    "[]",
                    starter,
                    uuid.uuid4().hex,
                    state,
                    1,
                    now + timedelta(hours=1),
                    "C1",
                    thread,
                    "C1",
                    thread,
                    0,
                    started,
                    started,
                )
            )
    return out


SQLITE_INSERTS = {
    "c": "INSERT INTO conversations (id, team_id, channel_id, thread_ts, started_by, "
    "created_at, updated_at, message_count, prompt_tokens, completion_tokens) "
    "VALUES (?,?,?,?,?,?,?,?,?,?)",
    "p": "INSERT INTO conversation_participants (conversation_id, user_id) VALUES (?,?)",
    "m": "INSERT INTO messages (id, conversation_id, role, content, slack_user, slack_ts, "
    "created_at) VALUES (?,?,?,?,?,?,?)",
    "x": "INSERT INTO proposals (id, team_id, conversation_id, assistant_message_id, "
    "result_message_id, tool_call_id, tool_name, arguments, arguments_hash, description, "
    "preview, requester, idempotency_key, state, version, expires_at, channel_id, "
    "thread_ts, card_channel, card_ts, attempts, created_at, updated_at) "
    "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
}
PG_COLUMNS = {
    "c": (
        "conversations",
        [
            "id",
            "team_id",
            "channel_id",
            "thread_ts",
            "started_by",
            "created_at",
            "updated_at",
            "message_count",
            "prompt_tokens",
            "completion_tokens",
        ],
    ),
    "p": ("conversation_participants", ["conversation_id", "user_id"]),
    "m": (
        "messages",
        ["id", "conversation_id", "role", "content", "slack_user", "slack_ts", "created_at"],
    ),
    "x": (
        "proposals",
        [
            "id",
            "team_id",
            "conversation_id",
            "assistant_message_id",
            "result_message_id",
            "tool_call_id",
            "tool_name",
            "arguments",
            "arguments_hash",
            "description",
            "preview",
            "requester",
            "idempotency_key",
            "state",
            "version",
            "expires_at",
            "channel_id",
            "thread_ts",
            "card_channel",
            "card_ts",
            "attempts",
            "created_at",
            "updated_at",
        ],
    ),
}


def sqlite_value(value: Any) -> Any:
    if isinstance(value, datetime):  # SQLAlchemy's SQLite storage format, in UTC
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    return value


async def seed(url: str, messages: int) -> tuple[float, list[tuple[str, str, str]]]:
    """Seconds it took, and (person, channel, thread) samples of threads people took part in."""
    started = time.monotonic()
    db = Database.from_url(url)
    await upgrade_to_head(db)
    await db.dispose()
    data = rows(messages)
    threads = [(c[4], c[2], c[3]) for c in data["c"][:: max(1, len(data["c"]) // 1000)]]
    if url.startswith("sqlite"):
        connection = sqlite3.connect(url.removeprefix("sqlite:///"))
        for key in ("c", "p", "m", "x"):
            connection.executemany(
                SQLITE_INSERTS[key], ([sqlite_value(v) for v in r] for r in data[key])
            )
        connection.commit()
        connection.execute("ANALYZE")
        connection.close()
    else:
        u = make_url(url)
        connection = await asyncpg.connect(host=u.host, user=u.username, database=u.database)
        for key in ("c", "p", "m", "x"):
            table, columns = PG_COLUMNS[key]
            records = data[key]
            if key == "x":
                records = [(*r[:7], r[7], *r[8:10], r[10], *r[11:]) for r in records]
            await connection.copy_records_to_table(table, records=records, columns=columns)
        for table in ("conversations", "messages", "proposals"):
            await connection.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                f"(SELECT max(id) FROM {table}))"
            )
        await connection.execute("ANALYZE")
        await connection.close()
    return time.monotonic() - started, threads


async def timed_commands(
    bot: RunningBot, slack: FakeSlack, samples: int, threads: list[tuple[str, str, str]]
) -> dict[str, list[float]]:
    rng = random.Random(11)
    results: dict[str, list[float]] = {"/history": [], "/history <thread>": [], "/approvals": []}
    for _ in range(samples):
        person, channel, thread = rng.choice(threads)
        link = f"https://test.slack.com/archives/{channel}/p{thread.replace('.', '')}"
        for name, command, text in (
            ("/history", "/history", ""),
            ("/history <thread>", "/history", link),
            ("/approvals", "/approvals", ""),
        ):
            started = time.monotonic()
            _, _, key = await bot.command(slack, command, text, person)
            while not slack.answers(key):
                await asyncio.sleep(0.0005)
            results[name].append((time.monotonic() - started) * 1000)
    return results


async def commands(url: str, label: str, messages: int, samples: int) -> None:
    seconds, threads = await seed(url, messages)
    print(
        f"\n== {label}: {messages:,} messages in {messages // PER_CONVERSATION:,} "
        f"conversations, {USERS:,} users (seeded in {seconds:.0f} s)"
    )
    slack, model = FakeSlack().start(), FakeOpenAI().start()
    bot = await start_bot(make_settings(slack, model, url))
    try:
        await timed_commands(bot, slack, 5, threads)  # warm up caches and connections
        results = await timed_commands(bot, slack, samples, threads)
    finally:
        await stop_bot(bot)
        slack.stop()
        model.stop()
    for name, values in results.items():
        print(
            f"  {name:<20} p50 {pct(values, 0.5):6.1f} ms   p99 {pct(values, 0.99):6.1f} ms"
            f"   ({len(values)} requests)"
        )


async def prompt_growth() -> None:
    model = FakeOpenAI().start()
    with tempfile.TemporaryDirectory() as tmp:
        db = Database.from_url(f"sqlite:///{Path(tmp) / 'p.db'}")
        await upgrade_to_head(db)
        counter = TokenCounter("gpt-4o-mini")
        memory = Memory(db, llm_for(model), counter, Budget())
        async with db.transaction() as session:
            conversation, _ = await repo.get_or_create_conversation(session, "T", "C", "1.0", "U1")
        sizes = {}
        for turn in range(1, 501):
            async with db.transaction() as session:
                await repo.add_message(
                    session,
                    conversation,
                    Role.USER,
                    f"Turn {turn}: " + "what about the deploy plan? " * 8,
                    slack_user="U1",
                )
                await repo.add_message(
                    session, conversation, Role.ASSISTANT, "Here is the plan, step by step. " * 20
                )
            if turn in (10, 100, 200, 300, 400, 500):
                prompt = await memory.prompt(conversation.id, "You are Countersign.", None, 200)
                sizes[turn] = counter.messages(prompt)
            elif turn % 10 == 0:
                await memory.prompt(conversation.id, "You are Countersign.", None, 200)
        await db.dispose()
    model.stop()
    print(
        f"\n== prompt tokens along one thread (budget {Budget().total:,} total, "
        f"{Budget().reply:,} kept for the reply; summaries written: {len(model.summaries)})"
    )
    for turn, size in sizes.items():
        print(f"  turn {turn:>3}: {size:6,} prompt tokens")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        await commands(f"sqlite:///{Path(tmp) / 'h.db'}", "SQLite", args.messages, args.samples)
    if not args.no_postgres:
        async with temporary_database("cs_bench") as url:
            await commands(url, "PostgreSQL", args.messages, args.samples)
    await prompt_growth()


if __name__ == "__main__":
    asyncio.run(main())
