"""Engine creation from the URL users paste, and the unit-of-work boundary.

`sqlite:///x.db`, `postgres://…` and `postgresql://…` are accepted as they are; the async drivers
(aiosqlite, asyncpg) are chosen here. SQLite runs in WAL mode with a busy timeout so that the
listener, the streamer and the CLI can share one file.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import event, exc, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from bot.db.group_commit import GroupCommit

SQLITE_BUSY_TIMEOUT_MS = 10_000
CONNECTION_WAIT_SECONDS = 60.0
_PROBE = text("SELECT 1")


class DatabaseBusy(RuntimeError):
    """No database connection came free in time: the process is overloaded or PostgreSQL hangs."""


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
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    # WAL is a property of the file: set once. Switching needs the file to itself, and SQLite
    # may refuse at once ("database is locked") while replicas starting together open it.
    cursor.execute("PRAGMA journal_mode")
    mode = cursor.fetchone()
    for attempt in range(50):
        if mode and str(mode[0]).lower() == "wal":
            break
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            mode = cursor.fetchone()
        except Exception as exc:  # the driver's OperationalError, adapted by SQLAlchemy
            if "locked" not in str(exc) or attempt == 49:
                raise
            time.sleep(0.1)  # a fresh file being set up by another process; once per file
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


READ_ONLY = "countersign_read_only"  # an execution option: a reader's transaction
# The session `info` key of the secret audit rows are keyed with (`bot.db.audit_chain`).
AUDIT_KEY = "countersign_audit_key"


def _sqlite_begin_immediate(connection: Any) -> None:
    """Take the write lock when a transaction starts, unless it only reads.

    A deferred transaction that reads and then writes can fail at once with SQLITE_BUSY when
    another one did the same; IMMEDIATE makes writers queue behind the busy timeout instead.
    A reader (`Database.reading`) needs no lock at all in WAL mode: it reads a snapshot while
    the bot writes, so an operator's export of a busy database never waits on the bot.
    """
    read_only = connection.get_execution_options().get(READ_ONLY, False)
    connection.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")


def _drop_closed_connection(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
    """A connection asyncpg already knows is closed is replaced at checkout, for free (the
    pool retries the checkout with a new connection)."""
    driver = getattr(dbapi_connection, "driver_connection", None)
    if driver is not None and driver.is_closed():
        raise exc.DisconnectionError("the server closed this connection")


def create_engine(raw_url: str, pool_size: int = 10) -> AsyncEngine:
    url = async_url(raw_url)
    if url.get_backend_name() == "sqlite":
        engine = create_async_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        event.listen(engine.sync_engine, "begin", _sqlite_begin_immediate)
        return engine
    # A fixed pool: replicas x DATABASE_POOL_SIZE must stay under the server's max_connections
    # (100 by default). Callers queue in `Database.transaction`, in order, never in the pool.
    engine = create_async_engine(
        url, pool_size=pool_size, max_overflow=0, pool_timeout=CONNECTION_WAIT_SECONDS
    )
    event.listen(engine.sync_engine.pool, "checkout", _drop_closed_connection)
    return engine


class Database:
    """Engine plus session factory; `transaction()` is the one place that commits.

    Transactions queue for a connection first come, first served, behind an asyncio semaphore
    (FIFO) sized like the pool: SQLAlchemy's async pool hands a free connection to any task that
    asks at that moment (`get_nowait`), so its order is not promised. Under overload the queue
    grows instead of failing; a wait of `wait_seconds` ends in `DatabaseBusy`, a plain error.
    (bench/load once saw 60 s waits while no connection was held over 4 s: too much work per
    click, not a leak; see docs/benchmarks.md.)

    On SQLite every transaction takes the write lock (BEGIN IMMEDIATE), and SQLite's busy
    handler waits for a lock by sleeping in steps of up to 100 ms: twenty replies starting at
    once would queue for seconds. Within one process the queue is one transaction wide instead,
    so waiting costs microseconds; other processes sharing the file still fall back on the busy
    timeout.
    """

    def __init__(
        self,
        engine: AsyncEngine,
        wait_seconds: float = CONNECTION_WAIT_SECONDS,
        audit_key: str | None = None,
    ) -> None:
        self.engine = engine
        # `audit_key` (AUDIT_SIGNING_KEY): the audit rows written through this database are
        # keyed with it; every session carries it to `audit_chain.append`.
        self.sessions = async_sessionmaker(
            engine, expire_on_commit=False, info={AUDIT_KEY: audit_key}
        )
        self._sqlite = engine.url.get_backend_name() == "sqlite"
        size = 1 if self._sqlite else engine.pool.size()  # type: ignore[attr-defined]
        self._turns = asyncio.Semaphore(size)
        self.wait_seconds = wait_seconds
        # Small independent writes of many turns at once share a transaction (`group.run`),
        # and so do their reads of history (`reads`: one snapshot, off the writers' queue).
        self.group = GroupCommit(self.transaction)
        self.reads = GroupCommit(self.reading)

    @classmethod
    def from_url(cls, raw_url: str, pool_size: int = 10, audit_key: str | None = None) -> Database:
        return cls(create_engine(raw_url, pool_size), audit_key=audit_key)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncSession]:
        try:
            async with asyncio.timeout(self.wait_seconds):
                await self._turns.acquire()
        except TimeoutError:
            raise DatabaseBusy(
                f"no database connection came free within {self.wait_seconds:.0f} s"
            ) from None
        try:
            if self._sqlite:
                async with self.sessions() as session, session.begin():
                    yield session
                return
            session = await self._live_session()
            async with session:
                try:
                    yield session
                except BaseException:
                    await session.rollback()
                    raise
                await session.commit()
        finally:
            self._turns.release()

    @asynccontextmanager
    async def reading(self) -> AsyncIterator[AsyncSession]:
        """A transaction that only reads, from one snapshot: everything read in it is the
        database at one moment, however long it takes and whatever is written meanwhile (so
        `audit verify` reads chain heads and rows that agree). On SQLite a deferred read
        transaction (WAL: takes no write lock, does not queue behind the process's writers);
        on PostgreSQL REPEATABLE READ, READ ONLY. Closed, not committed, at the end: what was
        read stays readable (closing, unlike a rollback, expires nothing)."""
        async with self.engine.connect() as connection:
            options: dict[str, Any] = {READ_ONLY: True}
            if not self._sqlite:
                options |= {"isolation_level": "REPEATABLE READ", "postgresql_readonly": True}
            await connection.execution_options(**options)
            async with AsyncSession(bind=connection, expire_on_commit=False) as session:
                yield session

    async def _live_session(self) -> AsyncSession:
        """A session whose transaction has begun on a connection that answered.

        A PostgreSQL restart cuts every pooled connection, and asyncpg may not have noticed
        yet. The transaction's first statement is a probe: if the connection turns out dead,
        SQLAlchemy invalidates the pool and the transaction starts again on a new connection,
        before any of the caller's work ran. One round trip, where `pool_pre_ping` costs three
        (BEGIN, a query, ROLLBACK) before the transaction's own BEGIN: a third of the bot's
        socket writes under load."""
        for attempt in range(2):
            session = self.sessions()
            try:
                await session.execute(_PROBE)
            except DBAPIError as error:
                await session.close()
                if attempt or not error.connection_invalidated:
                    raise
                continue
            return session
        raise AssertionError("unreachable")

    async def dispose(self) -> None:
        await self.engine.dispose()
