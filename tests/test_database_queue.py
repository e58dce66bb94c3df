"""Waiting for a database connection: in arrival order, bounded, and said plainly.

bench/load on three replicas saw clicks and turns fail after waiting 60 s for a connection;
transactions now queue in order and a wait that runs out is a clear `DatabaseBusy`.
"""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text

from bot.db.session import Database, DatabaseBusy

COUNT = 300


async def test_transactions_get_connections_in_the_order_they_asked(database_url: str) -> None:
    db = Database.from_url(database_url, pool_size=2)
    order: list[int] = []
    try:
        async with db.transaction() as session:  # warm the pool
            await session.execute(text("SELECT 1"))

        async def work(n: int) -> None:
            async with db.transaction() as session:
                order.append(n)
                await session.execute(text("SELECT 1"))
                await asyncio.sleep(0.002)

        # Newcomers keep arriving faster than the pool serves them, while earlier ones wait:
        # each must still be served in turn.
        tasks = []
        for n in range(COUNT):
            tasks.append(asyncio.get_running_loop().create_task(work(n)))
            await asyncio.sleep(0.001)
        await asyncio.gather(*tasks)
    finally:
        await db.dispose()
    # Everyone ran, and nobody was overtaken by more than the pool's width.
    assert sorted(order) == list(range(COUNT))
    overtaken = max(position - n for position, n in enumerate(order))
    assert overtaken <= 2, f"a transaction was overtaken by {overtaken} later ones"


@pytest.mark.postgres
async def test_a_wait_beyond_the_limit_is_a_clear_error_and_the_queue_recovers(
    postgres_url: str,
) -> None:
    db = Database.from_url(postgres_url, pool_size=2)
    db.wait_seconds = 0.3
    release, both_held = asyncio.Event(), asyncio.Event()
    holding = 0

    async def hold() -> None:
        nonlocal holding
        async with db.transaction() as session:
            await session.execute(text("SELECT 1"))
            holding += 1
            if holding == 2:
                both_held.set()
            await release.wait()

    holders = [asyncio.get_running_loop().create_task(hold()) for _ in range(2)]
    try:
        await asyncio.wait_for(both_held.wait(), 10)
        with pytest.raises(DatabaseBusy, match="no database connection came free within"):
            async with db.transaction():
                pass
        release.set()
        await asyncio.gather(*holders)
        async with db.transaction() as session:  # the refused wait left nothing behind
            assert await session.scalar(text("SELECT 41 + 1")) == 42
    finally:
        release.set()
        await db.dispose()
