"""Many model calls reserving and settling at once (issue 29's burst), on real SQLite files
and the real PostgreSQL: calls that meet in one transaction are decided as if one at a time,
in arrival order, never past a limit across replicas, and a call whose write fails fails
alone."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import replace
from decimal import Decimal

import pytest

from bot.db.session import Database
from bot.spend.ledger import Spend
from bot.spend.standing import Refused, Reservation, Tokens
from tests.spend_helpers import (
    ALICE,
    MODEL,
    Policy,
    budget,
    close_all,
    hold,
    spend_on,
    standing,
)

# On gpt-4o-mini, 1,000 prompt tokens and 1,000 reply tokens cost $0.00075 (750,000 nano).
CALL = 750_000
ROOM_FOR_TEN = Decimal("0.0075")


@asynccontextmanager
async def databases(url: str, count: int) -> AsyncIterator[list[Database]]:
    """`count` replicas' databases on one URL."""
    async with AsyncExitStack() as stack:
        found = []
        for _ in range(count):
            db = Database.from_url(url)
            stack.push_async_callback(db.dispose)
            found.append(db)
        stack.push_async_callback(close_all)  # first: the ledgers stop before the databases
        yield found


async def reserve_many(spends: list[Spend], count: int) -> list[Reservation | Refused]:
    """`count` calls at once, each in a turn of its own, spread over `spends`' replicas."""
    return list(
        await asyncio.gather(
            *(
                spends[i % len(spends)].reserve(replace(ALICE, turn_key=f"t{i}"), MODEL, 1000, 1000)
                for i in range(count)
            )
        )
    )


async def test_fifty_calls_at_once_on_two_replicas_never_pass_the_limit(
    migrated_database_url: str,
) -> None:
    async with databases(migrated_database_url, 2) as replicas:
        policy = Policy(
            [
                budget("all", usd=ROOM_FOR_TEN),
                budget("alice", scope={"user": "U0ALICE"}, tokens=10**6),
            ]
        )
        spends = [spend_on(db, policy) for db in replicas]
        results = await reserve_many(spends, 50)
        held = [r for r in results if isinstance(r, Reservation)]
        assert len(held) == 10  # exactly as many as fit
        assert len({r.id for r in held}) == 10
        assert all(r.standing.name == "all" for r in results if isinstance(r, Refused))
        assert (await standing(spends[0], "all")).reserved_nano == 10 * CALL
        alice = await standing(spends[1], "alice")
        assert alice.reserved_tokens == 10 * 2000  # nothing held for the refused ones


async def test_calls_at_once_on_one_replica_are_decided_in_arrival_order(
    migrated_database_url: str,
) -> None:
    async with databases(migrated_database_url, 1) as (db,):
        spend = spend_on(db, Policy([budget("all", usd=ROOM_FOR_TEN)]))
        results = await reserve_many([spend], 50)
        assert [isinstance(r, Reservation) for r in results] == [True] * 10 + [False] * 40
        refused = results[-1]
        assert isinstance(refused, Refused)
        assert (refused.standing.reserved_nano, refused.standing.limit_nano) == (
            10 * CALL,
            10 * CALL,
        )


async def test_settling_frees_room_for_calls_reserving_at_once(migrated_database_url: str) -> None:
    """A charge and holds in one batch: the holds after it see the room it freed."""
    async with databases(migrated_database_url, 1) as (db,):
        spend = spend_on(db, Policy([budget("all", usd=ROOM_FOR_TEN)]))
        first = [await hold(spend) for _ in range(10)]
        _, *after = await asyncio.gather(
            spend.settle(first[0], Tokens(0, 0), Tokens(0, 0)),  # a call that used nothing
            *(spend.reserve(replace(ALICE, turn_key=f"t{i}"), MODEL, 1000, 1000) for i in range(3)),
        )
        assert [isinstance(r, Reservation) for r in after] == [True, False, False]
        now = await standing(spend, "all")
        assert (now.used_nano, now.reserved_nano) == (0, 10 * CALL)


async def test_a_write_that_fails_in_a_batch_fails_alone(migrated_database_url: str) -> None:
    """A call whose hold cannot be stored (a count past what a BIGINT holds) raises; the calls
    that met it in one transaction are held and charged as if it had not been there."""
    async with databases(migrated_database_url, 1) as (db,):
        spend = spend_on(db, Policy([budget("all", usd=10, fallback_model=MODEL)]))
        earlier = await hold(spend)
        outcomes = await asyncio.gather(
            spend.reserve(replace(ALICE, turn_key="a"), MODEL, 1000, 1000),
            spend.reserve(replace(ALICE, turn_key="bad"), MODEL, 10**19, 1000),
            spend.settle(earlier, Tokens(1000, 1000), Tokens(0, 0)),
            spend.reserve(replace(ALICE, turn_key="c"), MODEL, 1000, 1000),
            return_exceptions=True,
        )
        assert isinstance(outcomes[1], Exception)
        assert isinstance(outcomes[0], Reservation)
        assert isinstance(outcomes[3], Reservation)
        now = await standing(spend, "all")
        assert (now.used_nano, now.reserved_nano, now.reserved_tokens) == (CALL, 2 * CALL, 4000)


@pytest.mark.parametrize("calls", [1, 3])
async def test_settling_a_call_twice_at_once_charges_it_once(
    migrated_database_url: str, calls: int
) -> None:
    async with databases(migrated_database_url, 2) as replicas:
        policy = Policy([budget("all", usd=10)])
        spends = [spend_on(db, policy) for db in replicas]
        held = [await hold(spends[0], asker=replace(ALICE, turn_key=f"t{i}")) for i in range(calls)]
        await asyncio.gather(
            *(
                spends[n % 2].settle(h, Tokens(1000, 1000), Tokens(0, 0))
                for h in held
                for n in range(4)
            )
        )
        await asyncio.gather(*(s.flush() for s in spends))  # each writes its settles behind
        now = await standing(spends[0], "all")
        assert (now.used_nano, now.reserved_nano, now.used_tokens) == (
            calls * CALL,
            0,
            calls * 2000,
        )
