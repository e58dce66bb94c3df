"""Engine creation from the URL users paste, and the unit-of-work boundary.

`sqlite:///x.db`, `postgres://…` and `postgresql://…` are accepted as they are; the async drivers
(aiosqlite, asyncpg) are chosen here. SQLite runs in WAL mode with a busy timeout so that the
listener, the streamer and the CLI can share one file.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

SQLITE_BUSY_TIMEOUT_MS = 10_000


def async_url(raw: str) -> URL:
    """The SQLAlchemy URL with this app's async driver for the database the user named."""
    if raw.startswith("postgres://"):
        raw = "postgresql://" + raw.removeprefix("postgres://")
    url = make_url(raw)
    backend = url.get_backend_name()
    if backend == "sqlite":
        return url.set(drivername="sqlite+aiosqlite")
    if backend == "postgresql":
        return url.set(drivername="postgresql+asyncpg")
    raise ValueError(f"unsupported database {backend!r}")


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # Let SQLAlchemy, not the driver, open transactions (needed for savepoints), see below.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _sqlite_begin_immediate(connection: Any) -> None:
    """Take the write lock when a transaction starts.

    A deferred transaction that reads and then writes can fail at once with SQLITE_BUSY when
    another one did the same; IMMEDIATE makes writers queue behind the busy timeout instead.
    """
    connection.exec_driver_sql("BEGIN IMMEDIATE")


def create_engine(raw_url: str, pool_size: int = 10) -> AsyncEngine:
    url = async_url(raw_url)
    if url.get_backend_name() == "sqlite":
        engine = create_async_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        event.listen(engine.sync_engine, "begin", _sqlite_begin_immediate)
        return engine
    # A fixed pool: replicas x DATABASE_POOL_SIZE must stay under the server's max_connections
    # (100 by default); work beyond it waits for a connection instead of failing.
    return create_async_engine(
        url, pool_size=pool_size, max_overflow=0, pool_timeout=60, pool_pre_ping=True
    )


class Database:
    """Engine plus session factory; `transaction()` is the one place that commits.

    On SQLite every transaction takes the write lock (BEGIN IMMEDIATE), and SQLite's busy
    handler waits for a lock by sleeping in steps of up to 100 ms: twenty replies starting at
    once would queue for seconds. Within one process an asyncio lock hands the database to one
    transaction at a time instead, so waiting costs microseconds; other processes sharing the
    file still fall back on the busy timeout.
    """

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.sessions = async_sessionmaker(engine, expire_on_commit=False)
        self._serialise = engine.url.get_backend_name() == "sqlite"
        self._write_lock = asyncio.Lock()

    @classmethod
    def from_url(cls, raw_url: str, pool_size: int = 10) -> Database:
        return cls(create_engine(raw_url, pool_size))

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncSession]:
        if self._serialise:
            async with self._write_lock, self.sessions() as session, session.begin():
                yield session
        else:
            async with self.sessions() as session, session.begin():
                yield session

    async def dispose(self) -> None:
        await self.engine.dispose()
