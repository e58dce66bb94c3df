"""Run Alembic migrations programmatically on the app's own async engine."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, text

from bot.db.session import Database

MIGRATIONS = Path(__file__).parent / "migrations"


def alembic_config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


# Any constant shared by every replica: the key of the advisory lock migrations run under.
MIGRATION_LOCK = 0x436F756E74657273  # "Counters"


def _upgrade(connection: Connection) -> None:
    if connection.dialect.name == "postgresql":
        # Replicas starting together: one migrates, the others wait, then find nothing to do.
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
    command.upgrade(alembic_config(connection), "head")


def _current(connection: Connection) -> set[str]:
    return set(MigrationContext.configure(connection).get_current_heads())


async def upgrade_to_head(db: Database) -> None:
    """Bring the schema to the newest revision (idempotent; safe on every start, and when
    several replicas start at once: PostgreSQL serialises them with an advisory lock, SQLite
    with its write lock, as every transaction here begins IMMEDIATE). A schema already at
    head is seen by a read that takes no lock: an operator's command run against a busy
    SQLite file does not queue behind the bot's writes to learn there is nothing to do."""
    heads = set(ScriptDirectory.from_config(alembic_config()).get_heads())
    async with db.reading() as session:
        if await (await session.connection()).run_sync(_current) == heads:
            return
    async with db.engine.begin() as connection:
        await connection.run_sync(_upgrade)
