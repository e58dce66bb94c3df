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
