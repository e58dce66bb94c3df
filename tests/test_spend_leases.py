"""Leases (bot/spend/leases.py), on real SQLite files and the real PostgreSQL, two `Spend`s
on one database as two replicas: calls taken in memory never pass a limit, a replica never
refuses while room is free (its own lease counts as free; others' is reclaimed first), a
crashed replica's lease is charged whole, and a reload lowering a limit holds at once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal

import pytest
from sqlalchemy import select

from bot.db.models import SpendWindow
from bot.db.session import Database
from bot.spend.leases import INTERVAL, LAPSE, RETRIES
from bot.spend.standing import Refused, Reservation, Tokens
from tests.spend_helpers import (
    ALICE,
    CALL,
    MODEL,
    OPEN,
    Clock,
    Policy,
    budget,
    close_all,
    hold,
    refusal,
    spend_on,
    standing,
)


def room_for(calls: int) -> Decimal:
    return Decimal(calls * CALL) / Decimal(10**9)


@pytest.fixture
async def two(migrated_database_url: str) -> AsyncIterator[tuple[Database, Database]]:
    first, second = (
        Database.from_url(migrated_database_url),
        Database.from_url(migrated_database_url),
    )
    yield first, second
    await close_all()
    await first.dispose()
    await second.dispose()


async def held_in(db: Database, name: str = "all") -> tuple[int, int, int, int]:
    """The window row as stored: used, reserved and leased nano-dollars, and leased tokens."""
    async with db.reading() as session:
        row = (
            await session.execute(
                select(
                    SpendWindow.used_nano,
                    SpendWindow.reserved_nano,
                    SpendWindow.leased_nano,
                    SpendWindow.leased_tokens,
                ).where(SpendWindow.budget == name)
            )
        ).one()
    return int(row[0]), int(row[1]), int(row[2]), int(row[3])


def in_memory(got: Reservation | Refused) -> bool:
    """Taken from a lease, with no database round trip."""
    return isinstance(got, Reservation) and got.id is None and got.ticket is not None


async def test_a_lease_serves_the_next_calls_in_memory_and_never_past_the_limit(
    two: tuple[Database, Database],
) -> None:
    db, _ = two
    spend = spend_on(db, Policy([budget("all", usd=room_for(10))]))
    first = await spend.reserve(ALICE, MODEL, 1000, 1000)
    assert isinstance(first, Reservation)
    assert first.id is not None  # the locked path, which granted a lease
    results = [
        await spend.reserve(replace(ALICE, turn_key=f"t{i}"), MODEL, 1000, 1000) for i in range(9)
    ]
    assert all(in_memory(r) for r in results)
    await refusal(spend)
    await spend.flush()
    used, reserved, leased, _ = await held_in(db)
    assert (used, reserved, leased) == (0, 10 * CALL, 0)


async def test_a_second_replicas_first_call_is_not_refused_while_room_is_free(
    two: tuple[Database, Database],
) -> None:
    """Replica A leased all the free room and sits idle on it: B's first call asks for it
    back (the window's reclaim generation), A's flusher gives its unused room back, and B's
    call is held, within a few flush intervals. The room is then shared, never exceeded."""
    db_a, db_b = two
    policy = Policy([budget("all", usd=room_for(10))])
    a, b = spend_on(db_a, policy), spend_on(db_b, policy)
    await hold(a)
    assert in_memory(await a.reserve(replace(ALICE, turn_key="a2"), MODEL, 1000, 1000))
    await a.flush()
    assert (await held_in(db_a))[2] == 8 * CALL  # A holds all the rest as its lease
    started = time.monotonic()
    got = await b.reserve(replace(ALICE, turn_key="b1"), MODEL, 1000, 1000)
    assert isinstance(got, Reservation), got
    assert time.monotonic() - started < (RETRIES + 2) * INTERVAL + 2.0
    results = [
        await s.reserve(replace(ALICE, turn_key=f"x{i}"), MODEL, 1000, 1000)
        for i, s in enumerate([a, b] * 8)
    ]
    assert sum(isinstance(r, Reservation) for r in results) == 7  # 3 + 7 = 10, no more
    await asyncio.gather(a.flush(), b.flush())
    used, reserved, leased, _ = await held_in(db_a)
    assert (used, reserved) == (0, 10 * CALL)
    assert leased == 0


async def test_a_replica_counts_its_own_lease_as_free(two: tuple[Database, Database]) -> None:
    """A call bigger than what its process's lease has left takes the locked path, where the
    lease's room counts as free: it is not refused while the room it needs is free or held
    only by its own process (an earlier attempt refused it, pausing turns with room free)."""
    db, _ = two
    spend = spend_on(db, Policy([budget("all", tokens=10_000)]))
    first = await hold(spend, size=500)  # 1,000 tokens; a lease of the 9,000 left
    for i in range(2):
        assert in_memory(await spend.reserve(replace(ALICE, turn_key=f"f{i}"), MODEL, 500, 500))
    await spend.settle(first, Tokens(0, 0), Tokens(0, 0))  # it used nothing: 1,000 free
    await spend.flush()
    assert (await held_in(db))[3] == 7_000
    big = await spend.reserve(replace(ALICE, turn_key="big"), MODEL, 4000, 3500)
    assert isinstance(big, Reservation)  # 7,500: the lease's 7,000 and 500 of the 1,000
    assert big.id is not None
    async with db.reading() as session:  # decided at once: nobody was asked for room back
        assert await session.scalar(select(SpendWindow.reclaim)) == 0
    now = await standing(spend, "all")
    assert (now.used_tokens, now.reserved_tokens) == (0, 9_500)
    await refusal(spend)


async def test_fifty_calls_at_once_on_two_replicas_holding_leases_never_pass_the_limit(
    two: tuple[Database, Database],
) -> None:
    db_a, db_b = two
    policy = Policy([budget("all", usd=room_for(12))])
    spends = [spend_on(db_a, policy), spend_on(db_b, policy)]
    for spend in spends:  # each replica has called once: each holds a lease
        await hold(spend, asker=replace(ALICE, turn_key=f"warm{id(spend)}"))
    results = await asyncio.gather(
        *(
            spends[i % 2].reserve(replace(ALICE, turn_key=f"t{i}"), MODEL, 1000, 1000)
            for i in range(50)
        )
    )
    held = [r for r in results if isinstance(r, Reservation)]
    assert len(held) == 10  # exactly the room left
    assert all(r.standing.name == "all" for r in results if isinstance(r, Refused))
    await asyncio.gather(*(s.flush() for s in spends))
    used, reserved, leased, _ = await held_in(db_a)
    assert (used, reserved) == (0, 12 * CALL)
    assert reserved + leased <= 12 * CALL


async def test_a_crashed_replicas_lease_is_charged_whole_and_then_only_a_full_budget_refuses(
    two: tuple[Database, Database],
) -> None:
    """A took calls from its lease in memory and died before writing them: its lease stops
    being renewed, the sweeper (on B) charges it whole (what A took is unknown: never
    under-count), and B is refused only once the limit is truly reached."""
    db_a, db_b = two
    clock = Clock()
    policy = Policy([budget("all", usd=room_for(20))])
    a, b = spend_on(db_a, policy, clock), spend_on(db_b, policy, clock)
    OPEN.remove(a)  # it will crash: nobody closes it
    await hold(a)  # the locked path: 1 call held, a lease of 16 (CAP) of the 19 free
    for i in range(3):
        assert in_memory(await a.reserve(replace(ALICE, turn_key=f"a{i}"), MODEL, 1000, 1000))
    await a.flusher.flush()
    assert (await held_in(db_a))[:3] == (0, 4 * CALL, 13 * CALL)
    assert in_memory(await a.reserve(replace(ALICE, turn_key="lost"), MODEL, 1000, 1000))
    task = a.flusher._task  # the crash: nothing more is written, nothing renewed
    a.flusher._closed = True
    if task is not None:
        task.cancel()
    clock.advance(seconds=LAPSE.total_seconds() + 1)
    assert await b.release_stale(timedelta(minutes=10)) == 0  # A's holds are young still
    used, reserved, leased, _ = await held_in(db_b)
    assert (used, reserved, leased) == (13 * CALL, 4 * CALL, 0)  # the whole lease charged
    for i in range(3):  # 20 - 17: room for three more, which B gets
        await hold(b, asker=replace(ALICE, turn_key=f"b{i}"))
    refused = await refusal(b)
    assert refused.standing.used_nano + refused.standing.reserved_nano == 20 * CALL


async def test_a_reload_lowering_the_limit_mid_window_holds_at_once_on_both_replicas(
    two: tuple[Database, Database],
) -> None:
    db_a, db_b = two
    policy = Policy([budget("all", tokens=100_000)])
    a, b = spend_on(db_a, policy), spend_on(db_b, policy)
    await hold(a)
    await hold(b, asker=replace(ALICE, turn_key="b"))
    assert in_memory(await a.reserve(replace(ALICE, turn_key="a2"), MODEL, 1000, 1000))
    await asyncio.gather(a.flush(), b.flush())
    assert (await held_in(db_a))[3] > 20_000  # both hold leases far above what follows
    policy.budgets = [budget("all", tokens=9_000)]  # 6,000 held: room for one more call
    results = await asyncio.gather(
        *(
            (a, b)[i % 2].reserve(replace(ALICE, turn_key=f"r{i}"), MODEL, 1000, 1000)
            for i in range(10)
        )
    )
    assert sum(isinstance(r, Reservation) for r in results) == 1
    assert not any(in_memory(r) for r in results)  # no lease granted before the reload
    await asyncio.sleep(3 * INTERVAL)  # the flushers give the old leases back
    await asyncio.gather(a.flush(), b.flush())
    async with db_a.reading() as session:
        row = (
            await session.execute(
                select(
                    SpendWindow.used_tokens, SpendWindow.reserved_tokens, SpendWindow.leased_tokens
                )
            )
        ).one()
    assert row[0] + row[1] + row[2] <= 9_000
    assert row[1] == 8_000


async def test_settles_are_written_behind_and_charged_once(two: tuple[Database, Database]) -> None:
    db, _ = two
    spend = spend_on(db, Policy([budget("all", usd=room_for(10), tokens=10**6)]))
    calls = [await hold(spend, asker=replace(ALICE, turn_key=f"s{i}")) for i in range(4)]
    started = time.monotonic()
    for call in calls:
        for _ in range(2):  # settled twice: charged once
            assert await spend.settle(call, Tokens(600, 400), Tokens(0, 0)) == []
    assert time.monotonic() - started < 0.05  # nothing waited for the database
    await spend.close()
    now = await standing(spend, "all")
    assert (now.used_tokens, now.reserved_tokens, now.reserved_nano) == (4000, 0, 0)
    *_, leased, _ = await held_in(db)
    assert leased == 0  # closing gave the lease back
