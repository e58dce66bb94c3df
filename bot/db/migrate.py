"""Run Alembic migrations programmatically on the app's own async engine."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection

from bot.db.session import Database

MIGRATIONS = Path(__file__).parent / "migrations"


def alembic_config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def _upgrade(connection: Connection) -> None:
    command.upgrade(alembic_config(connection), "head")


async def upgrade_to_head(db: Database) -> None:
    """Bring the schema to the newest revision (idempotent; safe on every start)."""
    async with db.engine.begin() as connection:
        await connection.run_sync(_upgrade)
