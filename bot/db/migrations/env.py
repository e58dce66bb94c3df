"""Alembic environment: uses the connection handed over by `bot.db.migrate` when there is one
(the app and `countersign migrate`), else `DATABASE_URL` (the `alembic` CLI, for new revisions)."""

from __future__ import annotations

import asyncio
import os

from alembic import context
from sqlalchemy import Connection

from bot.db.models import Base
from bot.db.session import create_engine

target_metadata = Base.metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=True,  # one set of migrations for SQLite and PostgreSQL
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_from_url() -> None:
    engine = create_engine(os.environ.get("DATABASE_URL", "sqlite:///countersign.db"))
    async with engine.begin() as connection:
        await connection.run_sync(_run)
    await engine.dispose()


handed_over = context.config.attributes.get("connection")
if handed_over is not None:
    _run(handed_over)
else:
    asyncio.run(_run_from_url())
