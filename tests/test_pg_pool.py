"""The tests' pool of PostgreSQL copies (`tests/pg.py pooled_database`): a copy handed to the
next test holds none of the last test's rows, its sequences start again, and a copy whose
schema a test changed is never handed on."""

from __future__ import annotations

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from tests.pg import pooled_database

pytestmark = pytest.mark.postgres
INSERT = (
    "INSERT INTO conversations (team_id, channel_id, thread_ts, started_by, created_at, "
    "updated_at, message_count, prompt_tokens, completion_tokens) "
    "VALUES ('T', 'C', '1.0', 'U', now(), now(), 0, 0, 0)"
)


async def connect(url: str) -> asyncpg.Connection:
    parsed = make_url(url)
    return await asyncpg.connect(
        host=parsed.host, port=parsed.port or 5432, user=parsed.username, database=parsed.database
    )


async def test_a_reused_copy_is_empty_and_its_ids_start_again(migrated_postgres: str) -> None:
    async with pooled_database(migrated_postgres) as first:
        left_open = await connect(first)  # the pool ends the sessions it finds
        await left_open.execute(INSERT)
    left_open.terminate()
    async with pooled_database(migrated_postgres) as second:
        assert second == first  # the same copy, handed on
        connection = await connect(second)
        try:
            assert await connection.fetchval("SELECT count(*) FROM conversations") == 0
            assert await connection.fetchval(f"{INSERT} RETURNING id") == 1
        finally:
            await connection.close()


async def test_a_copy_whose_schema_changed_is_not_handed_on(migrated_postgres: str) -> None:
    async with pooled_database(migrated_postgres) as first:
        connection = await connect(first)
        try:
            await connection.execute("CREATE TABLE stray (id int)")
        finally:
            await connection.close()
    async with pooled_database(migrated_postgres) as second:
        assert second != first
        connection = await connect(second)
        try:
            assert await connection.fetchval("SELECT to_regclass('stray')") is None
        finally:
            await connection.close()
