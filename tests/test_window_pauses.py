"""A pause (a 429's Retry-After) stops a window's or a bucket's calls, here and on every replica
sharing it through Redis; and where it is shared, a budgeted call costs one Redis round trip
per window it takes from (the pause is checked with the take, not before it)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from redis.asyncio import Redis

from bot.coordination import LocalBucket, LocalWindow, RedisBucket, RedisWindow, Window
from bot.slack.budgets import Limits, WorkspaceBudgets
from bot.slack.call_budgets import Spent, asking
from tests.test_replicas import Editor, redis, shared_budgets  # noqa: F401 - the fixture

Make = Callable[[Redis, str], Window]
KINDS: dict[str, Make] = {
    "local window": lambda _r, _k: LocalWindow(5, 60.0),
    "local bucket": lambda _r, _k: LocalBucket(5, 1.0),
    "redis window": lambda r, k: RedisWindow(r, k, 5, 60.0),
    "redis bucket": lambda r, k: RedisBucket(r, k, 5, 1.0),
}


@pytest.mark.parametrize("kind", list(KINDS))
async def test_a_paused_window_refuses_with_the_pause_left_then_grants(
    kind: str,
    redis: Redis,  # noqa: F811
) -> None:
    window = KINDS[kind](redis, f"test:{uuid.uuid4().hex}")
    assert (await window.take(keep_free=0))[0]
    await window.pause(0.3)
    granted, wait = await window.take(keep_free=0)
    assert not granted
    assert wait is not None
    assert 0.1 < wait <= 0.3
    assert await window.free() == 4  # a refused take spends nothing


@pytest.mark.parametrize("kind", ["redis window", "redis bucket"])
async def test_a_pause_one_replica_learned_stops_the_others_take(
    kind: str,
    redis: Redis,  # noqa: F811
) -> None:
    key = f"test:{uuid.uuid4().hex}"
    here, there = KINDS[kind](redis, key), KINDS[kind](redis, key)
    await here.pause(5.0)
    granted, wait = await there.take(keep_free=0)  # its own process never saw the 429
    assert not granted
    assert wait is not None
    assert 4.0 < wait <= 5.0


class Counted:
    """Counts the commands sent to Redis (a script's EVALSHA is one)."""

    def __init__(self, client: Redis) -> None:
        self.sent: list[str] = []
        original: Callable[..., Awaitable[Any]] = client.execute_command

        async def counted(*args: Any, **options: Any) -> Any:
            self.sent.append(str(args[0]))
            return await original(*args, **options)

        client.execute_command = counted  # type: ignore[method-assign]


async def test_a_budgeted_post_is_one_round_trip_per_window(redis: Redis) -> None:  # noqa: F811
    """chat.postMessage takes from its channel's bucket and the method's window: two scripts,
    each checking its own pause; no pause read before them."""
    budgets = WorkspaceBudgets(Limits(), redis=redis, workspace_key=uuid.uuid4().hex)
    await budgets.calls.admit("chat.postMessage", "C1")  # scripts loaded, replica announced
    counted = Counted(redis)
    await budgets.calls.admit("chat.postMessage", "C1")
    assert counted.sent == ["EVALSHA", "EVALSHA"]
    # Another channel: a bucket of its own, which announces this replica once, then takes.
    await budgets.calls.admit("chat.postMessage", "C2")
    assert counted.sent[2:] == ["EVALSHA"] * 3


async def test_a_paused_method_stops_posts_on_a_replica_that_never_saw_the_429(
    redis: Redis,  # noqa: F811
) -> None:
    key = uuid.uuid4().hex
    here = WorkspaceBudgets(Limits(), redis=redis, workspace_key=key)
    there = WorkspaceBudgets(Limits(), redis=redis, workspace_key=key)
    await there.calls.admit("chat.postMessage", "C1")
    here.rate_limited("chat.postMessage", 30.0, "C1")
    await asyncio.sleep(0.2)  # the pause is shared in the background
    with pytest.raises(Spent), asking(skip=True):
        await there.calls.admit("chat.postMessage", "C1")


async def test_a_final_edit_is_one_round_trip_and_a_shared_pause_is_asked_once(
    redis: Redis,  # noqa: F811
) -> None:
    """chat.update's budget shared by two replicas: a final edit costs one script (its take,
    which checks the pause), and a pause the other replica learned, once a take has told of
    it, is waited out here without asking Redis again at every step."""
    first, second = shared_budgets(redis, 100, 10.0)
    await second.acquire(Editor(wants_final=True))  # its script loaded, replica announced
    counted = Counted(redis)
    await second.acquire(Editor(wants_final=True))
    assert counted.sent == ["EVALSHA"]
    first.pause(0.6)
    await asyncio.sleep(0.1)  # the pause reaches Redis
    counted.sent.clear()
    started = time.monotonic()
    await second.acquire(Editor(wants_final=True))
    assert time.monotonic() - started >= 0.4
    assert counted.sent == ["EVALSHA", "EVALSHA"]  # refused (paused), then granted after it
    for budget in (first, second):
        await budget.stop()
