"""Run Alembic migrations programmatically on the app's own async engine.

Alembic (with the Mako and Pygments it brings) is imported only to migrate: a start whose
schema is already at head learns that from the migration files' `revision` and
`down_revision` lines and the `alembic_version` table, as Alembic would."""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, inspect, text

from bot.db.session import Database

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).parent / "migrations"
VERSION_TABLE = "alembic_version"  # Alembic's default, which env.py keeps
# `revision: str = "0023"`, `down_revision: str | None = "0022"` (or a tuple, for a merge)
_LINKS = re.compile(r"^(revision|down_revision)\b[^=\n]*=\s*(.+?)\s*$", re.MULTILINE)


def alembic_config(connection: Connection | None = None) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


# Any constant shared by every replica: the key of the advisory lock migrations run under.
MIGRATION_LOCK = 0x436F756E74657273  # "Counters"


def _upgrade(connection: Connection) -> None:
    from alembic import command

    if connection.dialect.name == "postgresql":
        # Replicas starting together: one migrates, the others wait, then find nothing to do.
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
    command.upgrade(alembic_config(connection), "head")


@lru_cache(maxsize=1)
def head_revisions() -> frozenset[str]:
    """The newest revision(s): every revision no other one names as its `down_revision`."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in (MIGRATIONS / "versions").glob("*.py"):
        links = {
            name: ast.literal_eval(value)
            for name, value in _LINKS.findall(path.read_text(encoding="utf-8"))
        }
        revisions.add(links["revision"])
        down = links.get("down_revision")
        parents.update([down] if isinstance(down, str) else down or ())
    return frozenset(revisions - parents)


def _current(connection: Connection) -> set[str]:
    if not inspect(connection).has_table(VERSION_TABLE):
        return set()
    rows = connection.execute(text(f"SELECT version_num FROM {VERSION_TABLE}"))  # noqa: S608
    return {row[0] for row in rows}


async def upgrade_to_head(db: Database) -> None:
    """Bring the schema to the newest revision (idempotent; safe on every start, and when
    several replicas start at once: PostgreSQL serialises them with an advisory lock, SQLite
    with its write lock, as every transaction here begins IMMEDIATE). A schema already at
    head is seen by a read that takes no lock: an operator's command run against a busy
    SQLite file does not queue behind the bot's writes to learn there is nothing to do."""
    async with db.reading() as session:
        if await (await session.connection()).run_sync(_current) == head_revisions():
            return
    async with db.engine.begin() as connection:
        await connection.run_sync(_upgrade)
