"""Replicas whose clocks disagree share one Slack budget fairly (issue 28): the shared window
keeps the Redis server's time, so a replica whose clock runs ten minutes ahead neither takes the
whole window nor tells the others to wait minutes; and what replicas share of their learned
rates stays within the rules (clamped, and a rate under the floor expires). Real Redis."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from bot.coordination import RedisWindow
from bot.slack.budgets import APPEND
from bot.slack.learned_rates import EPOCH_SECONDS, LearnedRate, SharedRates
from tests.fakes.slack import wait_until
from tests.test_replicas import REDIS_URL

TEN_MINUTES = 600.0


class Clock:
    """A replica's clock: the real one, `offset` seconds off."""

    def __init__(self, offset: float = 0.0) -> None:
        self.offset = offset

    def __call__(self) -> float:
        return time.time() + self.offset


@pytest.fixture
async def redis() -> AsyncIterator[Redis]:
    client = Redis.from_url(REDIS_URL)
    yield client
    await client.aclose()


@pytest.fixture
async def prefix(redis: Redis) -> AsyncIterator[str]:
    """This test's own keys, deleted after it."""
    prefix = f"countersign-test-clocks:{uuid.uuid4().hex}"
    yield prefix
    keys = [key async for key in redis.scan_iter(match=f"{prefix}*")]
    if keys:
        await redis.delete(*keys)


async def test_a_replica_whose_clock_runs_ten_minutes_ahead_does_not_starve_another(
    redis: Redis, prefix: str
) -> None:
    key = f"{prefix}:chat.update"
    ahead_clock = Clock(TEN_MINUTES)
    ahead = RedisWindow(redis, key, 10, 60.0, replica="ahead", clock=ahead_clock)
    on_time = RedisWindow(redis, key, 10, 60.0, replica="on-time", clock=Clock())

    granted = {"ahead": 0, "on-time": 0}
    for _ in range(5):
        for window in (ahead, on_time):
            ok, _ = await window.take(keep_free=0)
            granted[window.replica] += ok
    assert granted == {"ahead": 5, "on-time": 5}  # each its share of the one window

    for window in (ahead, on_time):
        ok, wait = await window.take(keep_free=0)
        assert not ok  # the one ahead does not see the other's calls as long gone
        assert wait is not None
        assert 0 <= wait <= 60.0  # until the oldest call leaves: not ten minutes more
        assert await window.free() == 0
        assert await window.free(within=60.0) == 10  # every call has left by then

    await ahead.pause(30.0)  # a 429 seen by the replica ahead pauses the other as long only
    assert 0 < await on_time.paused_for() <= 30.0
    ahead_clock.offset += 10  # its own clock says it is time to announce itself again
    await ahead.take(keep_free=0)
    assert (ahead.replicas, on_time.replicas) == (2, 2)  # both alive, whatever the clocks


def rates(clock: list[float]) -> LearnedRate:
    return LearnedRate(APPEND, 100, 600, lambda limit: None, lambda: clock[0])


async def test_a_shared_rate_under_the_floor_expires_and_recovers_on_every_replica(
    redis: Redis, prefix: str
) -> None:
    first_clock, second_clock = [TEN_MINUTES], [0.0]  # monotonic clocks: unrelated
    first, second = rates(first_clock), rates(second_clock)
    shared_first = SharedRates(redis, prefix, [first])
    shared_second = SharedRates(redis, prefix, [second])
    key = f"{prefix}:learned:{APPEND}"

    first.refused(1.0)  # 429s continuing at the floor on the first replica
    first_clock[0] += EPOCH_SECONDS
    first.refused(1.0)
    assert first.limit == 50
    await wait_until(lambda: not shared_first._writes)
    assert 0 < await redis.ttl(key) <= 60  # by Redis's clock: a stale low rate does not stay

    await shared_second.refresh()
    assert second.limit == 50  # a 429 seen by one replica lowers the rate of all
    for _ in range(30):  # the second replica's learning loop, once a second, no 429
        second_clock[0] += 1
        second.tick()
    assert second.limit == 100  # back at the floor on its own, within a minute
    await wait_until(lambda: not shared_second._writes)
    await shared_second.refresh()
    assert second.limit == 100
    assert await redis.ttl(key) > 3600  # the floor is kept as long as any learned rate


@pytest.mark.parametrize(
    ("stored", "limit"),
    [("nan:0", 100), ("inf:1", 100), ("-inf:0", 100), ("soon", 100), ("0.001:0", 25)],
)
async def test_a_replica_cannot_push_a_shared_rate_out_of_bounds(
    redis: Redis, prefix: str, stored: str, limit: int
) -> None:
    clock = [0.0]
    learned = rates(clock)
    shared = SharedRates(redis, prefix, [learned])
    await redis.set(f"{prefix}:learned:{APPEND}", stored)
    await shared.refresh()
    assert learned.limit == limit
    for _ in range(30):
        clock[0] += 1
        learned.tick()
    assert learned.limit == 100
