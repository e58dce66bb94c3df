"""What a turn asks Slack about its message (its files, who wrote it) runs beside the opening
of its conversation (`bot.conversation.thread_import.looking_up`): it must never outlive its
turn, nor leave a failure nobody reads."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from bot.conversation import thread_import
from bot.conversation.incoming import Incoming
from bot.conversation.thread_import import LookedUp, looking_up


def incoming() -> Incoming:
    return Incoming(
        team_id="T1",
        channel_id="C1",
        user_id="UALICE",
        text="hi",
        ts="1.0",
        thread_ts=None,
        event_id="Ev1",
        is_dm=False,
        mentions_bot=True,
    )


async def test_a_turn_that_ends_early_cancels_its_look_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started = asyncio.Event()

    async def hangs(_slack: Any, _incoming: Incoming) -> LookedUp:
        started.set()
        await asyncio.sleep(3600)
        raise AssertionError("not reached")

    monkeypatch.setattr(thread_import, "look_up", hangs)
    left: list[asyncio.Task[LookedUp]] = []

    async def turn() -> None:
        async with looking_up(None, incoming()) as task:  # type: ignore[arg-type]
            left.append(task)
            await started.wait()
            raise RuntimeError("the turn failed before it stored its message")

    with pytest.raises(RuntimeError):
        await turn()
    await asyncio.sleep(0)
    assert left[0].cancelled()


async def test_a_failed_look_up_nobody_awaited_is_not_reported_as_unretrieved(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reported: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))

    async def fails(_slack: Any, _incoming: Incoming) -> LookedUp:
        raise ConnectionError("Slack unreachable")

    monkeypatch.setattr(thread_import, "look_up", fails)
    try:
        async with looking_up(None, incoming()) as task:  # type: ignore[arg-type]
            await asyncio.sleep(0.01)  # it failed meanwhile; the turn then stopped
        del task
        gc.collect()  # an unretrieved failure is reported when its task is collected
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(None)
    assert reported == []


async def test_a_look_up_the_turn_awaits_gives_its_failure_to_the_turn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def fails(_slack: Any, _incoming: Incoming) -> LookedUp:
        raise ConnectionError("Slack unreachable")

    monkeypatch.setattr(thread_import, "look_up", fails)

    async def turn() -> None:
        async with looking_up(None, incoming()) as task:  # type: ignore[arg-type]
            await task

    with pytest.raises(ConnectionError):
        await turn()
