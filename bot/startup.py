"""What can stop a start, said in one line: the database cannot be reached, the port is taken,
Slack refuses the connection. The person who typed the command sees what is wrong and what to
do, without a traceback and without a secret (a password in `DATABASE_URL` is masked).

`countersign` prints `StartupError`'s text and exits 1; anything else still fails loudly, as a
bug should.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import sqlite3
from collections.abc import Awaitable
from typing import TypeVar

from sqlalchemy import text

from bot.db.session import READ_ONLY, Database

log = logging.getLogger(__name__)

T = TypeVar("T")
# A database that does not answer within this long is reported as unreachable (asyncpg's own
# connect timeout is a minute, long enough to look like a hang).
DATABASE_TIMEOUT_SECONDS = 20.0
LONGEST_REASON = 200


class StartupError(Exception):
    """A start that cannot go on; the message is one line for the person starting it."""


def shown_url(db: Database) -> str:
    """The database's address as it may be printed: the password masked, without the driver
    the app picked (as the person wrote it in `DATABASE_URL`)."""
    url = db.engine.url
    return url.set(drivername=url.get_backend_name()).render_as_string(hide_password=True)


def reason(exc: BaseException) -> str:
    """The innermost cause of `exc` in a few words: the driver's own words, first line only."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = getattr(current, "orig", None) or current.__cause__ or current.__context__
    for candidate in reversed(seen):
        if isinstance(candidate, ConnectionRefusedError):
            return "connection refused"
        if isinstance(candidate, socket.gaierror):
            return "unknown host name"
        if isinstance(candidate, TimeoutError):
            return "no answer in time"
    root = seen[-1]
    words = str(root).strip().splitlines()
    said = words[0] if words else type(root).__name__
    return said[:LONGEST_REASON]


def open_sqlite_file(db: Database) -> None:
    """Open an SQLite file once with the standard driver, so that a file that cannot be opened
    fails here: aiosqlite's worker thread, when its connect fails, finishes its clean-up after
    the command has already closed its event loop and prints a traceback of its own."""
    url = db.engine.url
    path = url.database
    if url.get_backend_name() != "sqlite" or not path or path == ":memory:" or url.query:
        return  # not a plain file (a URI, options or memory): the driver's connect decides
    sqlite3.connect(path).close()


async def reach_database(db: Database) -> None:
    """Connect once before anything else uses the database; `StartupError` if that fails."""
    log.info("connecting to the database %s…", shown_url(db))
    try:
        await asyncio.to_thread(open_sqlite_file, db)
        async with asyncio.timeout(DATABASE_TIMEOUT_SECONDS), db.engine.connect() as connection:
            # As a reader: on SQLite a writer's transaction takes the write lock (BEGIN
            # IMMEDIATE), and an operator's export must not wait for a busy bot's.
            reader = await connection.execution_options(**{READ_ONLY: True})
            await reader.execute(text("SELECT 1"))
    except TimeoutError:
        problem = f"no answer within {DATABASE_TIMEOUT_SECONDS:g} s"
    except Exception as exc:  # any failure to connect is the same answer to the person
        problem = reason(exc)
    else:
        return
    password = db.engine.url.password
    if password:  # a driver's words never quote it as far as known; masked should one start to
        problem = problem.replace(str(password), "***")
    if db.engine.url.get_backend_name() == "sqlite":
        advice = "check DATABASE_URL (the file's folder must exist and be writable)"
    else:
        advice = "check DATABASE_URL and that the database server is running"
    raise StartupError(f"cannot reach the database at {shown_url(db)} ({problem}): {advice}")


async def listening(
    opening: Awaitable[T], host: str, port: int, port_option: str, host_option: str
) -> T:
    """Await `opening` (a server binding host:port); a taken or forbidden port becomes a
    `StartupError` that says how to choose another (`port_option`, e.g. "--port")."""
    try:
        return await opening
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            problem = f"port {port} on {host} is already in use (another Countersign?)"
            advice = f"stop what uses it, or choose another port with {port_option}"
        elif exc.errno == errno.EACCES:
            problem = f"not allowed to listen on port {port} (ports below 1024 need extra rights)"
            advice = f"choose another port with {port_option}"
        elif exc.errno == errno.EADDRNOTAVAIL:
            problem = f"cannot listen on {host}: it is not an address of this machine"
            advice = f"choose another with {host_option}"
        else:
            problem = f"cannot listen on {host}:{port} ({exc.strerror or type(exc).__name__})"
            advice = f"check {host_option} and {port_option}"
        raise StartupError(f"{problem}: {advice}") from None
