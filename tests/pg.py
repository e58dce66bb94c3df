"""A throw-away PostgreSQL database on the test server, for tests and benchmarks."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from sqlalchemy.engine import make_url

POSTGRES_URL = os.environ.get("TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


async def _admin() -> asyncpg.Connection:
    url = make_url(POSTGRES_URL)
    try:
        return await asyncpg.connect(
            host=url.host, port=url.port or 5432, user=url.username, database=url.database
        )
    except OSError as exc:
        raise RuntimeError(
            f"PostgreSQL is not reachable at {POSTGRES_URL} ({exc}); start it, e.g. "
            "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start"
        ) from exc


async def create_database(name: str, template: str | None = None) -> str:
    """Create database `name` (empty, or a copy of `template`); its URL."""
    admin = await _admin()
    try:
        copied = f' TEMPLATE "{template}"' if template else ""
        await admin.execute(f'CREATE DATABASE "{name}"{copied}')
    finally:
        await admin.close()
    return make_url(POSTGRES_URL).set(database=name).render_as_string(hide_password=False)


async def drop_database(name: str) -> None:
    admin = await _admin()
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


@asynccontextmanager
async def temporary_database(
    prefix: str = "cs_test", template: str | None = None
) -> AsyncIterator[str]:
    """The URL of a new database, dropped afterwards (with any open connections): empty, or
    a copy of the database named `template` (which nobody may be connected to)."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = await _admin()
    try:
        copied = f' TEMPLATE "{template}"' if template else ""
        await admin.execute(f'CREATE DATABASE "{name}"{copied}')
    finally:
        await admin.close()
    try:
        yield make_url(POSTGRES_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        admin = await _admin()
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


# Copies of a migrated template, emptied and kept for the next test of this process: a copy
# costs ~0.25 s to create and ~0.2 s to drop on this machine (the whole catalog is copied
# through the WAL), emptying one a few milliseconds. Keyed by template.
_POOLS: dict[str, list[str]] = {}


@asynccontextmanager
async def pooled_database(template: str) -> AsyncIterator[str]:
    """Like `temporary_database(template=template)`, but the database is emptied afterwards
    and handed to the next test (`drop_pool` drops them). Only what the template's migrations
    made may be in it: a copy whose tables or revision differ afterwards is dropped, as is one
    that cannot be emptied, so no test sees another's schema or rows."""
    pool = _POOLS.setdefault(template, [])
    name = pool.pop() if pool else f"cs_test_{uuid.uuid4().hex[:12]}"
    if name not in _SHAPES:
        await create_database(name, template)
        _SHAPES[name] = await _shape(name)
    try:
        yield make_url(POSTGRES_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        try:
            kept = await _empty(name)
        except (OSError, asyncpg.PostgresError):
            kept = False
        if kept:
            pool.append(name)
        else:
            _SHAPES.pop(name, None)
            await drop_database(name)


async def drop_pool(template: str) -> None:
    for name in _POOLS.pop(template, []):
        _SHAPES.pop(name, None)
        await drop_database(name)


# A copy's tables, sequences and alembic revision as created: (tables, sequences, revision).
_SHAPES: dict[str, tuple[tuple[str, ...], tuple[str, ...], str]] = {}


async def _connect(name: str) -> asyncpg.Connection:
    url = make_url(POSTGRES_URL)
    return await asyncpg.connect(
        host=url.host, port=url.port or 5432, user=url.username, database=name
    )


async def _shape(name: str) -> tuple[tuple[str, ...], tuple[str, ...], str]:
    connection = await _connect(name)
    try:
        return await _shape_on(connection)
    finally:
        await connection.close()


async def _shape_on(
    connection: asyncpg.Connection,
) -> tuple[tuple[str, ...], tuple[str, ...], str]:
    tables = await connection.fetch(
        "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"
    )
    sequences = await connection.fetch(
        "SELECT sequencename FROM pg_sequences WHERE schemaname = 'public' ORDER BY 1"
    )
    revision = await connection.fetchval("SELECT string_agg(version_num, ',') FROM alembic_version")
    return tuple(r[0] for r in tables), tuple(r[0] for r in sequences), str(revision)


async def _empty(name: str) -> bool:
    """End every session on `name`, then delete every row but the revision's and restart
    every sequence, in one transaction; False (not emptied) if its shape changed."""
    admin = await _admin()
    try:
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = $1 AND pid <> pg_backend_pid()",
            name,
        )
    finally:
        await admin.close()
    tables, sequences, _ = _SHAPES[name]
    connection = await _connect(name)
    try:
        if await _shape_on(connection) != _SHAPES[name]:
            return False
        async with connection.transaction():
            # Foreign keys are not checked while emptying (every table is emptied).
            await connection.execute("SET LOCAL session_replication_role = replica")
            for table in tables:
                if table != "alembic_version":
                    await connection.execute(f'DELETE FROM "{table}"')  # noqa: S608 (catalog names)
            for sequence in sequences:
                await connection.execute("SELECT setval($1::regclass, 1, false)", f'"{sequence}"')
    finally:
        await connection.close()
    return True
