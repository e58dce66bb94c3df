"""Waiting for a database connection: in arrival order, bounded, and said plainly.

bench/load on three replicas saw clicks and turns fail after waiting 60 s for a connection;
transactions now queue in order and a wait that runs out is a clear `DatabaseBusy`.
"""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import event, text

from bot.db.session import Database, DatabaseBusy

COUNT = 300


async def test_transactions_get_connections_in_the_order_they_asked(database_url: str) -> None:
    """Connections go to transactions in the order they asked, counted when the pool hands one
    out (its `checkout`), not when the body starts: on PostgreSQL the body follows a probe
    round trip, and a server process the loaded machine left waiting lets the other
    connection serve several later transactions meanwhile, which says nothing about the
    queue (it failed so, "overtaken by 4")."""
    db = Database.from_url(database_url, pool_size=2)
    arrival: dict[asyncio.Task[None], int] = {}
    checkouts: list[int] = []

    def checkout(*_: object) -> None:
        task = asyncio.current_task()
        if task in arrival:
            checkouts.append(arrival[task])

    event.listen(db.engine.sync_engine.pool, "checkout", checkout)
    order: list[int] = []
    try:
        # Warm the pool: on PostgreSQL both connections, made before the race (SQLite
        # queues one transaction at a time).
        width = 1 if database_url.startswith("sqlite") else 2
        all_held = asyncio.Barrier(width)

        async def warm() -> None:
            async with db.transaction() as session:
                await session.execute(text("SELECT 1"))
                await all_held.wait()

        await asyncio.gather(*(warm() for _ in range(width)))

        async def work(n: int) -> None:
            async with db.transaction() as session:
                order.append(n)
                await session.execute(text("SELECT 1"))
                await asyncio.sleep(0.002)

        # Newcomers keep arriving faster than the pool serves them, while earlier ones wait:
        # each must still be served in turn.
        tasks = []
        for n in range(COUNT):
            task = asyncio.get_running_loop().create_task(work(n))
            arrival[task] = n
            tasks.append(task)
            await asyncio.sleep(0.001)
        await asyncio.gather(*tasks)
    finally:
        await db.dispose()
    assert sorted(order) == list(range(COUNT))  # everyone ran
    assert sorted(checkouts) == list(range(COUNT))
    # Nobody was overtaken by more than the pool's width.
    overtaken = max(position - n for position, n in enumerate(checkouts))
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
