"""The workspace scheduler's Tier 2 slots: `auto` leaves native streaming when starts are spent
and comes back once the minute has passed; a start is granted only with a stop in reserve for
every open stream; with Redis, replicas share the start, stop and append windows."""

from __future__ import annotations

import asyncio
import uuid

from redis.asyncio import Redis

from bot.slack.budgets import Limits, WorkspaceBudgets
from tests.test_replicas import REDIS_URL, Editor


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_starts_run_out_and_come_back_after_the_minute() -> None:
    clock = Clock()
    budgets = WorkspaceBudgets(Limits(starts_per_minute=2), clock=clock)
    slots = budgets.streams
    for _ in range(2):
        assert await slots.try_open()
        await slots.stop_permit()
    assert not await slots.try_open(), "a third start in the minute: the reply uses edits"
    clock.now += 30
    assert not await slots.try_open()
    clock.now += 32  # the first starts left the window
    assert await slots.try_open(), "back to native streaming"
    assert slots.open_streams == 1


async def test_native_mode_does_not_wait_for_a_start_that_cannot_come_in_time() -> None:
    clock = Clock()
    slots = WorkspaceBudgets(Limits(starts_per_minute=4), clock=clock).streams
    for _ in range(4):
        assert await slots.try_open()
        await slots.stop_permit()  # the reply ended
    # The clock is injected and stands still: had it waited for its patience, it would never
    # return (5 s: only a bound for a hang, whatever the machine's load).
    gave_up = await asyncio.wait_for(slots.open(patience=30), 5)
    assert not gave_up, "the next start frees in 60 s, not within 30"
    clock.now += 59.9
    opening = asyncio.create_task(slots.open(patience=30))
    await asyncio.sleep(0.05)
    assert not opening.done(), "a start frees within the patience: it waits for it"
    clock.now += 10  # past the window and its safety margin
    assert await asyncio.wait_for(opening, 2)


async def test_a_start_needs_a_stop_in_reserve_for_every_open_stream() -> None:
    clock = Clock()
    slots = WorkspaceBudgets(Limits(starts_per_minute=3), clock=clock).streams
    assert await slots.try_open()
    assert await slots.try_open()
    # Two open streams will need two stops; spend two of the three stops elsewhere.
    for _ in range(2):
        granted, _ = await slots.stops.take(keep_free=0)
        assert granted
    assert not await slots.try_open(), "no stop would be left for a third stream"
    assert slots.open_streams == 2


async def test_replicas_share_the_tier_2_and_append_windows() -> None:
    redis = Redis.from_url(REDIS_URL)
    key = f"xoxb-test-{uuid.uuid4().hex}"
    try:
        first = WorkspaceBudgets(Limits(starts_per_minute=2, appends_per_minute=20), redis, key)
        second = WorkspaceBudgets(Limits(starts_per_minute=2, appends_per_minute=20), redis, key)
        assert await first.streams.try_open()
        assert await second.streams.try_open()
        assert not await first.streams.try_open(), "the other replica took the second start"
        assert not await second.streams.try_open()

        editor = Editor()
        first.appends.open(editor)
        second.appends.open(editor)
        taken_first = await first.appends.window.free()
        await first.appends.acquire(editor)
        assert await second.appends.window.free() == taken_first - 1
        other = WorkspaceBudgets(Limits(starts_per_minute=2), redis, f"xoxb-other-{key}")
        assert await other.streams.try_open(), "another workspace has its own windows"
        for budgets in (first, second, other):
            await budgets.stop()
    finally:
        await redis.aclose()
