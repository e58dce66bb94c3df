"""Redis misbehaving: a server that hangs, a thread lock held longer than its lease, replicas
that lose Redis and must share the workspace's edit budget rather than each take all of it."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from bot.coordination import RedisWindow
from bot.coordination.redis_window import _TAKE
from bot.thread_locks import ThreadLocks
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack
from tests.harness import make_settings, start_bot, stop_bot
from tests.test_replicas import REDIS_URL, redis  # noqa: F401 - the fixture

pytestmark = pytest.mark.postgres  # runs with the services CI starts


@pytest.fixture
async def hung_redis() -> AsyncIterator[str]:
    """A TCP server on loopback that accepts connections and never answers."""
    held: list[asyncio.StreamWriter] = []

    async def swallow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)
        while await reader.read(1024):
            pass

    server = await asyncio.start_server(swallow, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    yield f"redis://127.0.0.1:{port}/0"
    for writer in held:
        writer.close()
    server.close()


async def test_a_hung_redis_does_not_stall_replies(
    hung_redis: str, fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    bot = await start_bot(make_settings(fake_slack, fake_model, sqlite_url, redis_url=hung_redis))
    try:
        text = " ".join(f"w{i}" for i in range(20))
        fake_model.script(Script(text=text, tokens_per_second=20), Script(text="Second."))
        started = time.monotonic()
        await bot.mention("C1", "hello", fake_slack)
        await bot.idle(timeout=30)
        first = time.monotonic() - started
        (reply,) = fake_slack.bot_messages("C1")
        assert reply.text == text
        # About one Redis time-out in all (then the breaker skips it), not one per edit.
        assert first < 6, first
        started = time.monotonic()
        await bot.mention("C1", "again", fake_slack)
        await bot.idle(timeout=30)
        assert fake_slack.bot_messages("C1")[-1].text == "Second."
    finally:
        await stop_bot(bot)


async def test_a_thread_lock_outlives_its_lease_while_its_holder_works(
    redis: Redis,  # noqa: F811
) -> None:
    first, second = ThreadLocks(redis, f"t{uuid.uuid4().hex}"), None
    second = ThreadLocks(redis, first.prefix)
    first.LEASE_SECONDS = second.LEASE_SECONDS = 0.6
    order: list[str] = []

    async def long_turn() -> None:
        async with first.hold(1):
            order.append("first in")
            await asyncio.sleep(1.5)  # more than twice the lease
            order.append("first out")

    async def next_turn() -> None:
        await asyncio.sleep(0.2)
        async with second.hold(1):
            order.append("second in")

    await asyncio.gather(long_turn(), next_turn())
    assert order == ["first in", "first out", "second in"]


async def test_replicas_without_redis_share_the_budget(redis: Redis) -> None:  # noqa: F811
    key = f"countersign:test:{uuid.uuid4().hex}"
    mine, other = (RedisWindow(redis, key, 10, 60, replica=name) for name in ("mine", "other"))
    assert (await mine.take(0))[0]
    assert (await other.take(0))[0]
    mine._seen_at = 0.0  # count again now rather than in ten seconds
    assert (await mine.take(0))[0]
    assert mine.replicas == 2
    # Redis goes away: this replica keeps to its half of the workspace's 10 a minute, of
    # which it made two while Redis answered.
    dead = Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.2)
    mine.redis, mine._take = dead, dead.register_script(_TAKE)
    granted = [(await mine.take(0))[0] for _ in range(8)]
    assert granted.count(True) == 3
    await dead.aclose()
