"""Several replicas with REDIS_URL: one chat.update window for the workspace, a 429 that pauses
everyone, turns of one thread in order across instances, and survival when Redis is gone."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from redis.asyncio import Redis

from bot import shared_counts
from bot.coordination import RedisWindow, redis_client
from bot.shared_counts import SharedCount
from bot.slack.budgets import Limits, WorkspaceBudgets
from bot.slack.edit_budget import EditBudget
from bot.slack.parts_choice import edits_cannot_promise
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack
from tests.harness import make_settings, start_bot, stop_bot

REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


@dataclass
class Editor:
    wants_final: bool = False
    last_edit_at: float | None = None


@pytest.fixture
async def redis() -> AsyncIterator[Redis]:
    client = Redis.from_url(REDIS_URL)
    try:
        await client.ping()
    except Exception as exc:
        pytest.fail(f"Redis is not reachable at {REDIS_URL} ({exc}); start redis-server")
    yield client
    await client.aclose()


def shared_budgets(redis: Redis, limit: int, seconds: float) -> tuple[EditBudget, EditBudget]:
    key = f"test:{uuid.uuid4().hex}"
    return (
        EditBudget(limit, window_seconds=seconds, window=RedisWindow(redis, key, limit, seconds)),
        EditBudget(limit, window_seconds=seconds, window=RedisWindow(redis, key, limit, seconds)),
    )


async def test_two_replicas_share_one_window(redis: Redis) -> None:
    first, second = shared_budgets(redis, 10, 1.0)
    granted: list[float] = []

    async def edit(budget: EditBudget, deadline: float) -> None:
        editor = Editor()
        budget.open(editor)
        while time.time() < deadline:
            await budget.acquire(editor)
            editor.last_edit_at = time.monotonic()
            granted.append(time.time())
        budget.close(editor)

    deadline = time.time() + 2.5
    await asyncio.wait_for(
        asyncio.gather(*[edit(b, deadline) for b in (first, second) for _ in range(3)]), 10
    )
    for budget in (first, second):
        await budget.stop()
    granted.sort()
    for i, start in enumerate(granted):
        assert len([t for t in granted[i:] if t < start + 1.0]) <= 10
    assert len(granted) >= 15  # and the window was used, not starved


async def test_a_429_on_one_replica_pauses_the_other(redis: Redis) -> None:
    first, second = shared_budgets(redis, 100, 10.0)
    first.pause(0.5)
    await asyncio.sleep(0.05)  # the pause reaches Redis
    started = time.monotonic()
    await second.acquire(Editor(wants_final=True))
    assert time.monotonic() - started >= 0.4
    for budget in (first, second):
        await budget.stop()


async def test_without_redis_edits_still_flow_within_this_replicas_window() -> None:
    """Redis unreachable: edits are granted from the local window (not refused, not hung), and
    that window still holds the limit: the 11th edit of a 10-in-3-seconds window waits."""
    dead = Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.2)
    # A 3 s window: the first ten are granted at once, well inside it even on a loaded machine.
    budget = EditBudget(10, window_seconds=3.0, window=RedisWindow(dead, "test:dead", 10, 3.0))
    granted: list[float] = []
    try:
        for _ in range(11):
            editor = Editor(wants_final=True)
            await asyncio.wait_for(budget.acquire(editor), 5)
            granted.append(time.monotonic())
            budget.close(editor)
    finally:
        await budget.stop()
        await dead.aclose()
    assert granted[9] - granted[0] < 2.9  # the first ten flowed without Redis
    assert granted[10] - granted[0] >= 2.9  # the eleventh waited for the window


async def test_turns_of_one_thread_stay_in_order_across_instances(
    migrated_postgres_url: str, redis: Redis, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    prefix = uuid.uuid4().hex
    fake_model.script(Script(text="First answer."))
    settings = make_settings(fake_slack, fake_model, migrated_postgres_url, redis_url=REDIS_URL)
    first = await start_bot(settings)
    second = await start_bot(settings)
    try:
        root = await first.mention("C1", f"start {prefix}", fake_slack)
        await first.idle()
        fake_model.script(
            Script(text="Second answer.", time_to_first_token=0.5), Script(text="Third answer.")
        )
        await asyncio.gather(
            first.mention("C1", "question two", fake_slack, thread_ts=root),
            second.mention("C1", "question three", fake_slack, thread_ts=root),
        )
        await first.idle()
        await second.idle()
    finally:
        await stop_bot(first)
        await stop_bot(second)
    last = fake_model.requests[-1].body["messages"]
    # The later turn saw the earlier one's complete answer: they did not interleave.
    assert [m["content"] for m in last if m["role"] == "assistant"] == [
        "First answer.",
        "Second answer.",
    ]


async def test_a_shared_window_tells_what_will_be_free_within_some_seconds(redis: Redis) -> None:
    """What a budget paces by (bot/slack/pacing.py): the calls that leave the window by then
    count as free, on every replica alike."""
    window = RedisWindow(redis, f"test:{uuid.uuid4().hex}", 5, 1.0)
    assert (await window.take(keep_free=0))[0]
    await asyncio.sleep(0.5)
    assert (await window.take(keep_free=0))[0]
    assert await window.free() == 3
    assert await window.free(within=0.7) == 4  # the first call has left by then
    assert await window.free(within=2.0) == 5


class AnsweringSlowly(RedisWindow):
    """A shared window that says when the dispatcher is waiting for Redis's answer."""

    asked: asyncio.Event

    async def take(self, keep_free: int) -> tuple[bool, float | None]:
        self.asked.set()
        return await super().take(keep_free)


async def test_a_reply_that_stops_waiting_while_redis_answers_leaves_the_budget_working(
    redis: Redis,
) -> None:
    """A native reply gives up its append when its final is asked for (the stop carries it);
    if that happens while the shared window answers, the slot goes to the next reply and the
    budget goes on granting (it used to die: later edits of that replica waited for ever)."""
    window = AnsweringSlowly(redis, f"test:{uuid.uuid4().hex}", 10, 60.0)
    window.asked = asyncio.Event()
    budget = EditBudget(10, window_seconds=60.0, window=window)
    leaving, staying = Editor(wants_final=True), Editor(wants_final=True)
    gives_up = asyncio.ensure_future(budget.acquire(leaving))
    await window.asked.wait()  # the dispatcher awaits Redis with `leaving` chosen
    gives_up.cancel()
    await asyncio.wait_for(budget.acquire(staying), 2.0)
    window.asked.clear()
    await asyncio.wait_for(budget.acquire(Editor()), 2.0)  # and the one after it
    await budget.stop()


def replicas_of_one_workspace(redis: Redis, count: int) -> list[WorkspaceBudgets]:
    workspace = f"xoxb-{uuid.uuid4().hex}"
    return [WorkspaceBudgets(Limits(), redis, workspace_key=workspace) for _ in range(count)]


async def test_each_replica_keeps_post_slots_for_every_replicas_finals(
    redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reply in parts keeps `chat.postMessage` slots of the workspace's minute for the finals
    owed; the window is every replica's, so the finals counted must be too (each replica
    counted its own: another's first parts took the slots its finals needed)."""
    monkeypatch.setattr(shared_counts, "FRESH_SECONDS", 0.0)  # every read asks Redis
    first, second = replicas_of_one_workspace(redis, 2)
    try:
        for _ in range(3):
            first.owed_finals.owe()
        second.owed_finals.owe()
        await second.owed_finals.count.others()  # said (a change is said at once, in a task)
        assert await first.owed_finals.held() == 4
        assert await second.owed_finals.held() == 4
        for _ in range(3):
            first.owed_finals.paid()
        await first.owed_finals.count.others()
        assert await second.owed_finals.held() == 1
        # A replica that stops saying its count (it crashed) stops counting.
        first.owed_finals.owe()
        await first.owed_finals.count.others()
        assert await second.owed_finals.held() == 2
        count = second.owed_finals.count
        assert isinstance(count, SharedCount)
        count.REPLICA_TTL = 0.3
        await asyncio.sleep(0.5)
        assert await second.owed_finals.held() == 1
    finally:
        for budgets in (first, second):
            await budgets.stop()


async def test_a_new_reply_is_sent_as_edits_only_if_every_replicas_finals_fit(
    redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`chat.update` is the workspace's: a new reply goes as edits only when the window holds
    a final for it and for every reply open as edits on any replica; it was judged as if the
    others had as many open as this one (too few when they had more, too many when fewer)."""
    monkeypatch.setattr(shared_counts, "FRESH_SECONDS", 0.0)  # every read asks Redis
    busy, idle = replicas_of_one_workspace(redis, 2)
    try:
        for _ in range(47):  # 3 of the workspace's 50 left
            assert (await busy.edits.window.take(keep_free=0))[0]
        editors = [Editor() for _ in range(3)]
        for editor in editors:
            busy.edits.open(editor)
        await busy.edits.open_everywhere()  # said
        assert await edits_cannot_promise(idle.edits)  # 3 finals owed elsewhere, 3 slots
        for editor in editors:
            busy.edits.close(editor)
        await busy.edits.open_everywhere()
        idle.edits.open(Editor())
        idle.edits.open(Editor())
        assert not await edits_cannot_promise(idle.edits)  # 2 here, 1 more: 3 slots
    finally:
        for budgets in (busy, idle):
            await budgets.stop()


async def test_replies_opening_on_another_replica_make_the_window_scarce_here(
    redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The `chat.update` window is the workspace's, and so is the pace at which replies open
    on it: replies opening fast on one replica keep another's replies to their final edits
    (each refresh there would send a reply in parts, two posts instead of one)."""
    monkeypatch.setattr(shared_counts, "FRESH_SECONDS", 0.0)  # every read asks Redis
    busy, quiet = replicas_of_one_workspace(redis, 2)
    try:
        here = Editor(last_edit_at=time.monotonic())
        quiet.edits.open(here)
        await asyncio.wait_for(quiet.edits.acquire(here), 2)  # at rest: refreshed
        opened = [Editor(last_edit_at=time.monotonic()) for _ in range(10)]
        for editor in opened:  # 10 in the last 10 s: 60 finals a minute, more than its 50
            busy.edits.open(editor)
        await busy.edits.demand.count.others()  # said (a change is said at once, in a task)
        here.last_edit_at = time.monotonic()
        refresh = asyncio.create_task(quiet.edits.acquire(here))
        await asyncio.sleep(0.3)
        assert not refresh.done()
        here.wants_final = True
        quiet.edits.poke()
        await asyncio.wait_for(refresh, 2)
    finally:
        for budgets in (busy, quiet):
            await budgets.stop()


async def test_replicas_sharing_a_window_refresh_together_as_often_as_one_alone(
    redis: Redis,
) -> None:
    """The pace spreads what the window allows over the next seconds; with Redis the window
    is the workspace's, and each replica spent all of it (three replicas appended three times
    as fast: past Slack's floor, 429s on replicas only). Counted on the pace's clock (here a
    fake one, stepped), two replicas with a reply each refresh about as often as one."""
    now = [0.0]
    clients: list[Redis] = []

    def replica(key: str) -> EditBudget:
        # A client of its own with the time-outs every replica's has (`redis_client`): a
        # command cut off by a cancel never leaves the test waiting on a socket for good.
        client = redis_client(REDIS_URL)
        clients.append(client)
        window = RedisWindow(client, key, 600, 60.0)
        budget = EditBudget(600, burst=1, reserve_finals=False, clock=lambda: now[0], window=window)
        budget.open_replies = SharedCount(client, f"{key}:open")
        return budget

    async def refreshes(budgets: list[EditBudget]) -> int:
        granted = 0

        async def refresh(budget: EditBudget) -> None:
            nonlocal granted
            reply = Editor(last_edit_at=0.0)
            budget.open(reply)
            while True:
                await budget.acquire(reply)
                granted += 1

        for budget in budgets:
            await budget.open_everywhere()  # said
        tasks = [asyncio.create_task(refresh(budget)) for budget in budgets]
        for budget in budgets:
            await budget.open_everywhere()  # heard
        for _ in range(60):  # 0.6 s of the pace's clock
            now[0] += 0.01
            for budget in budgets:
                budget.poke()
            await asyncio.sleep(0.01)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for budget in budgets:
            await budget.stop()
            await budget.open_replies.stop()
        return granted

    try:
        alone = await refreshes([replica(f"test:{uuid.uuid4().hex}")])
        key = f"test:{uuid.uuid4().hex}"
        together = await refreshes([replica(key), replica(key)])
    finally:
        for client in clients:
            await client.aclose()
    assert alone >= 10
    assert together <= alone * 1.3
