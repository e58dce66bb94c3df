"""Migrations and repositories on SQLite and on PostgreSQL (same code, same migrations)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import inspect, text

from bot.db import repositories as repo
from bot.db.migrate import upgrade_to_head
from bot.db.models import Role
from bot.db.session import Database
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack
from tests.harness import make_settings, start_bot, stop_bot


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    database = Database.from_url(database_url)
    await upgrade_to_head(database)
    yield database
    await database.dispose()


async def test_migrations_create_the_schema_and_are_idempotent(db: Database) -> None:
    await upgrade_to_head(db)  # a second start changes nothing
    async with db.engine.connect() as connection:
        tables = await connection.run_sync(lambda c: set(inspect(c).get_table_names()))
        indexes = await connection.run_sync(
            lambda c: {i["name"] for i in inspect(c).get_indexes("messages")}
        )
        version = await connection.scalar(text("SELECT version_num FROM alembic_version"))
    assert {"conversations", "messages", "processed_events", "alembic_version"} <= tables
    assert {"ix_messages_conversation_id_id", "ix_messages_conversation_id_slack_ts"} <= indexes
    assert version == "0001"


async def test_delivery_keys_are_claimed_once(db: Database) -> None:
    async with db.transaction() as session:
        assert await repo.claim_delivery(session, ["evt:1", "msg:T:C:1"])
    async with db.transaction() as session:
        assert not await repo.claim_delivery(session, ["evt:2", "msg:T:C:1"])
        assert await repo.claim_delivery(session, ["evt:3"])  # the transaction is still usable
    async with db.transaction() as session:
        assert not await repo.claim_delivery(session, ["evt:3"])


async def test_concurrent_claims_let_exactly_one_through(db: Database) -> None:
    async def claim() -> bool:
        async with db.transaction() as session:
            return await repo.claim_delivery(session, ["evt:race"])

    results = await asyncio.gather(*[claim() for _ in range(10)])
    assert results.count(True) == 1


async def test_conversation_counters_and_message_order(db: Database) -> None:
    async with db.transaction() as session:
        conversation, created = await repo.get_or_create_conversation(
            session, "T", "C", "1.1", "UALICE"
        )
        assert created
        again, created_again = await repo.get_or_create_conversation(
            session, "T", "C", "1.1", "UBOB"
        )
        assert not created_again
        assert again.id == conversation.id
        await repo.add_message(session, conversation, Role.USER, "hi", slack_user="UALICE")
        calls = [{"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{}"}}]
        await repo.add_message(
            session,
            conversation,
            Role.ASSISTANT,
            None,
            tool_calls=calls,
            prompt_tokens=10,
            completion_tokens=4,
        )
        await repo.add_message(
            session, conversation, Role.TOOL, "ok", tool_call_id="c1", tool_name="t"
        )
    async with db.transaction() as session:
        recent = await repo.recent_messages(session, conversation.id, 2)
        refreshed = await repo.find_conversation(session, "T", "C", "1.1")
    assert [m.role for m in recent] == [Role.ASSISTANT, Role.TOOL]
    assert recent[0].tool_calls == calls
    assert refreshed is not None
    assert (refreshed.message_count, refreshed.prompt_tokens, refreshed.completion_tokens) == (
        3,
        10,
        4,
    )


async def test_concurrent_conversation_creation_yields_one_row(db: Database) -> None:
    async def create() -> int:
        async with db.transaction() as session:
            conversation, _ = await repo.get_or_create_conversation(session, "T", "C", "2.2", "U")
            return conversation.id

    ids = await asyncio.gather(*[create() for _ in range(8)])
    assert len(set(ids)) == 1


async def test_a_whole_turn_persists(
    database_url: str, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Script(text="Stored reply.", prompt_tokens=5))
    bot = await start_bot(make_settings(fake_slack, fake_model, database_url))
    try:
        await bot.mention("C1", "persist me", fake_slack)
        await bot.idle()
        async with bot.countersign.db.transaction() as session:
            conversation = await repo.find_conversation(
                session, "T0TEST", "C1", fake_slack.thread("C1")[0].ts
            )
            assert conversation is not None
            messages = await repo.all_messages(session, conversation.id)
    finally:
        await stop_bot(bot)
    assert [(m.role, m.content) for m in messages] == [
        (Role.USER, "persist me"),
        (Role.ASSISTANT, "Stored reply."),
    ]
    assert messages[1].prompt_tokens == 5


async def test_sqlite_runs_in_wal_mode_with_a_busy_timeout(tmp_path: Path) -> None:
    database = Database.from_url(f"sqlite:///{tmp_path / 'w.db'}")
    try:
        async with database.engine.connect() as connection:
            mode = await connection.scalar(text("PRAGMA journal_mode"))
            timeout = await connection.scalar(text("PRAGMA busy_timeout"))
    finally:
        await database.dispose()
    assert mode == "wal"
    assert timeout == 10_000


def test_migrate_command(database_url: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "OPENAI_"))}
    env.update({"SLACK_BOT_TOKEN": "xoxb-1", "OPENAI_API_KEY": "k", "DATABASE_URL": database_url})
    for _ in range(2):
        result = subprocess.run(
            [sys.executable, "-m", "bot", "migrate"],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        assert "database is up to date" in result.stdout
