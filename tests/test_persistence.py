"""Migrations and repositories on SQLite and on PostgreSQL (same code, same migrations)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text

from bot.db import repositories as repo
from bot.db.claims import DeliveryClaims
from bot.db.migrate import alembic_config, upgrade_to_head
from bot.db.models import Role
from bot.db.session import Database
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack
from tests.harness import clean_env, make_settings, run_cli, start_bot, stop_bot

HEAD = ScriptDirectory.from_config(alembic_config()).get_current_head()


@pytest.fixture
async def db(migrated_database_url: str) -> AsyncIterator[Database]:
    database = Database.from_url(migrated_database_url)
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
    assert version == HEAD


async def test_delivery_keys_are_claimed_once(db: Database) -> None:
    claims = DeliveryClaims(db)
    assert await claims.claim(["evt:1", "msg:T:C:1"])
    assert not await claims.claim(["evt:2", "msg:T:C:1"])  # the other event of one message
    assert not await claims.claim(["evt:1", "msg:T:C:1"])  # Slack's retry
    assert await claims.claim(["evt:3", "msg:T:C:3"])


async def test_concurrent_claims_on_two_replicas_let_exactly_one_through(
    db: Database, migrated_database_url: str
) -> None:
    """Two processes' worth of claimers (separate engines) race for the same deliveries."""
    other = Database.from_url(migrated_database_url)
    try:
        replicas = [DeliveryClaims(db), DeliveryClaims(other)]
        attempts = [replicas[i % 2].claim([f"evt:{i}", f"msg:T:C:{i % 5}"]) for i in range(40)]
        results = await asyncio.gather(*attempts)
    finally:
        await other.dispose()
    assert results.count(True) == 5  # one winner per message
    winners = {i % 5 for i, won in enumerate(results) if won}
    assert winners == set(range(5))


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
        recent = (await repo.messages_after(session, conversation.id, 0, 3))[1:]
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
    migrated_database_url: str, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Script(text="Stored reply.", prompt_tokens=5))
    bot = await start_bot(make_settings(fake_slack, fake_model, migrated_database_url))
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
    env = clean_env(SLACK_BOT_TOKEN="xoxb-1", OPENAI_API_KEY="k", DATABASE_URL=database_url)
    for _ in range(2):
        result = run_cli(["migrate"], env, tmp_path)
        assert result.returncode == 0, result.stderr
        assert "database is up to date" in result.stdout


async def test_replicas_starting_together_migrate_once(database_url: str) -> None:
    """Five processes' worth of engines upgrade a fresh database at the same moment."""
    engines = [Database.from_url(database_url) for _ in range(5)]
    try:
        await asyncio.gather(*(upgrade_to_head(db) for db in engines))
        async with engines[0].engine.connect() as connection:
            version = (
                await connection.execute(text("SELECT version_num FROM alembic_version"))
            ).scalar_one()
        assert version == HEAD
    finally:
        for db in engines:
            await db.dispose()


async def test_the_migrations_create_exactly_the_models(database_url: str) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from bot.db.models import Base

    db = Database.from_url(database_url)
    try:
        await upgrade_to_head(db)

        def differences(connection: object) -> list[object]:
            context = MigrationContext.configure(
                connection,  # type: ignore[arg-type]
                opts={"compare_type": True, "render_as_batch": True},
            )
            return list(compare_metadata(context, Base.metadata))

        async with db.engine.connect() as connection:
            found = await connection.run_sync(differences)
        assert found == []
    finally:
        await db.dispose()


async def test_an_export_reads_a_sqlite_file_while_the_bot_holds_its_write_lock(
    sqlite_url: str, tmp_path: Path
) -> None:
    """An operator exports the audit trail of a busy bot: the export (and the migration check
    before it) read a snapshot, so they neither wait for the writer's lock (10 s, then
    "database is locked") nor take it."""
    db = Database.from_url(sqlite_url)
    await upgrade_to_head(db)
    env = clean_env(SLACK_BOT_TOKEN="xoxb-1", OPENAI_API_KEY="k", DATABASE_URL=sqlite_url)
    try:
        async with db.transaction() as session:
            await session.execute(text("UPDATE proposals SET version = version"))  # locks
            started = asyncio.get_running_loop().time()
            result = await asyncio.to_thread(
                run_cli, ["audit", "export", "--format", "jsonl"], env, tmp_path
            )
            waited = asyncio.get_running_loop().time() - started
    finally:
        await db.dispose()
    assert result.returncode == 0, result.stderr
    assert "exported 0 proposal(s)" in result.stderr
    assert waited < 8  # the busy timeout is 10 s: it did not wait for the lock
