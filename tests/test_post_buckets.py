"""`chat.postMessage` per channel is a token bucket, as Slack documents it ("1 per second per
channel, short bursts >1 allowed"): three at once, then one a second. The fake Slack enforces
that bucket; the bot keeps one per channel (shared by replicas through Redis, on the Redis
server's clock) and posts as fast as it allows without a 429. Real Redis for the shared ones."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator

import aiohttp
import pytest
from redis.asyncio import Redis
from slack_sdk.web.async_client import AsyncWebClient

from bot.coordination import LocalBucket, RedisBucket
from bot.slack.budgets import Limits, WorkspaceBudgets
from bot.slack.web_client import web_client
from tests.fakes.slack import BOT_TOKEN, FakeSlack
from tests.test_replicas import REDIS_URL, redis  # noqa: F401 - the fixture

TEN_MINUTES = 600.0


async def raw_post(session: aiohttp.ClientSession, slack: FakeSlack) -> tuple[int, str | None]:
    """A post straight to the fake (no budget of the bot's): its status and Retry-After."""
    async with session.post(
        f"{slack.api_url}chat.postMessage",
        json={"channel": "C1", "text": "hi"},
        headers={"Authorization": f"Bearer {BOT_TOKEN}"},
    ) as answer:
        return answer.status, answer.headers.get("Retry-After")


async def test_the_fake_allows_a_burst_of_three_then_one_a_second(fake_slack: FakeSlack) -> None:
    async with aiohttp.ClientSession() as session:
        assert [(await raw_post(session, fake_slack))[0] for _ in range(3)] == [200] * 3
        refused_at = time.monotonic()
        assert await raw_post(session, fake_slack) == (429, "1")  # the next token, rounded up
        assert await raw_post(session, fake_slack) == (429, "1")  # refusals are not counted
        await asyncio.sleep(1.0 - (time.monotonic() - refused_at))
        assert (await raw_post(session, fake_slack))[0] == 200  # a second on, not three
        assert (await raw_post(session, fake_slack))[0] == 429  # one token, not a new burst


async def post_all(clients: list[AsyncWebClient], count: int) -> None:
    await asyncio.gather(
        *[
            clients[i % len(clients)].chat_postMessage(channel="C1", text=f"m{i}")
            for i in range(count)
        ]
    )


def c1_posts(slack: FakeSlack) -> list[float]:
    return [c.at for c in slack.calls_to("chat.postMessage") if c.args["channel"] == "C1"]


POSTS = 8  # due over 5 s of Slack's bucket (+0.5 s margin); a 3-in-3-s window took 7 s+


async def test_posts_to_one_channel_take_about_one_second_each_past_the_burst(
    fake_slack: FakeSlack, budgets: WorkspaceBudgets
) -> None:
    client = web_client(BOT_TOKEN, fake_slack.api_url, budgets)
    try:
        await post_all([client], POSTS)
    finally:
        assert client.session is not None
        await client.session.close()
    assert [c.status for c in fake_slack.calls_to("chat.postMessage")] == [200] * POSTS
    posts = c1_posts(fake_slack)
    assert POSTS - 3 <= posts[-1] - posts[0] < POSTS - 3 + 1.5


async def test_replicas_posting_to_one_channel_share_its_bucket(
    fake_slack: FakeSlack,
    redis: Redis,  # noqa: F811
) -> None:
    workspace = f"xoxb-{uuid.uuid4().hex}"
    replicas = [WorkspaceBudgets(Limits(), redis, workspace_key=workspace) for _ in range(2)]
    clients = [web_client(BOT_TOKEN, fake_slack.api_url, b) for b in replicas]
    try:
        await post_all(clients, POSTS)
    finally:
        for client, budgets in zip(clients, replicas, strict=True):
            assert client.session is not None
            await client.session.close()
            await budgets.stop()
    assert [c.status for c in fake_slack.calls_to("chat.postMessage")] == [200] * POSTS
    posts = c1_posts(fake_slack)
    assert posts[-1] - posts[0] < POSTS - 3 + 1.5  # together as fast as one alone


@pytest.fixture
async def key(redis: Redis) -> AsyncIterator[str]:  # noqa: F811
    found = f"countersign-test-bucket:{uuid.uuid4().hex}"
    yield found
    keys = [k async for k in redis.scan_iter(match=f"{found}*")]
    if keys:
        await redis.delete(*keys)


async def test_a_replica_whose_clock_runs_ahead_does_not_take_the_whole_bucket(
    redis: Redis,  # noqa: F811
    key: str,
) -> None:
    def ahead() -> float:
        return time.monotonic() + TEN_MINUTES

    early = RedisBucket(redis, key, 3, 1.0, replica="ahead", clock=ahead)
    on_time = RedisBucket(redis, key, 3, 1.0, replica="on-time")
    granted = [(await bucket.take(0))[0] for bucket in (early, on_time, early, on_time)]
    assert granted == [True, True, True, False]  # one bucket of three, whatever the clocks
    for bucket in (early, on_time):
        ok, wait = await bucket.take(0)
        assert not ok
        assert wait is not None
        assert 0 < wait <= 1.0  # the next token, on the server's clock: not ten minutes on
        assert await bucket.free() == 0
        assert await bucket.free(within=1.0) == 1
        assert await bucket.free(within=TEN_MINUTES) == 3


async def test_the_margin_keeps_a_burst_within_slacks_bucket(
    redis: Redis,  # noqa: F811
    key: str,
) -> None:
    """Half a second of tokens kept: the burst's third call waits up to 0.5 s, then the
    bucket refills at Slack's own rate."""
    now = [0.0]
    local = LocalBucket(3, 1.0, margin=0.5, clock=lambda: now[0])
    shared = RedisBucket(redis, key, 3, 1.0, margin=0.5)
    for bucket in (local, shared):
        assert [(await bucket.take(0))[0] for _ in range(3)] == [True, True, False]
        assert (await bucket.take(0))[1] == pytest.approx(0.5, abs=0.05)
    now[0] = 0.5
    assert (await local.take(0))[0]
    ok, wait = await local.take(0)
    assert not ok
    assert wait == pytest.approx(1.0)
    now[0] = 1.5
    assert (await local.take(0))[0]


async def test_without_redis_a_replica_keeps_to_its_share_of_the_bucket(
    redis: Redis,  # noqa: F811
    key: str,
) -> None:
    mine, other = (RedisBucket(redis, key, 3, 1.0, replica=name) for name in ("mine", "other"))
    assert (await other.take(0))[0]
    assert (await mine.take(0))[0]
    assert mine.replicas == 2
    dead = Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.2)
    try:
        mine.redis = dead
        mine._take = dead.register_script(mine._take.script)
        mine._tokens = dead.register_script(mine._tokens.script)
        # Its share: a bucket of one (3 // 2), a token every 2 s, and it just posted.
        ok, wait = await mine.take(0)
        assert not ok
        assert wait is not None
        assert 1.5 < wait <= 2.0
        assert not mine.breaker.closed  # one time-out, then Redis is skipped
    finally:
        await dead.aclose()
