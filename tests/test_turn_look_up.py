"""Who wrote a turn's message (a Slack read for a person not seen before) is asked beside the
opening of its conversation (`bot.conversation.thread_import.finding_author`): it must never
outlive its turn, nor leave a failure nobody reads."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.conversation import thread_import
from bot.conversation.incoming import Incoming
from bot.conversation.thread_import import finding_author
from bot.provenance import Source


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


async def test_a_turn_that_ends_early_cancels_its_author_lookup(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started = asyncio.Event()

    async def hangs(_slack: Any, _incoming: Incoming) -> Source:
        started.set()
        await asyncio.sleep(3600)
        raise AssertionError("not reached")

    monkeypatch.setattr(thread_import, "source_of_incoming", hangs)
    left: list[asyncio.Task[Source]] = []

    async def turn() -> None:
        async with finding_author(AsyncWebClient(), incoming()) as task:
            left.append(task)
            await started.wait()
            raise RuntimeError("the turn failed before it stored its message")

    with pytest.raises(RuntimeError):
        await turn()
    await asyncio.sleep(0)
    assert left[0].cancelled()


async def test_a_failed_author_lookup_nobody_awaited_is_not_reported_as_unretrieved(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reported: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))

    async def fails(_slack: Any, _incoming: Incoming) -> Source:
        raise ConnectionError("Slack unreachable")

    monkeypatch.setattr(thread_import, "source_of_incoming", fails)
    try:
        async with finding_author(AsyncWebClient(), incoming()) as task:
            await asyncio.sleep(0.01)  # it failed meanwhile; the turn then stopped
        del task
        gc.collect()  # an unretrieved failure is reported when its task is collected
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(None)
    assert reported == []


async def test_an_author_lookup_the_turn_awaits_gives_its_failure_to_the_turn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def fails(_slack: Any, _incoming: Incoming) -> Source:
        raise ConnectionError("Slack unreachable")

    monkeypatch.setattr(thread_import, "source_of_incoming", fails)

    async def turn() -> None:
        async with finding_author(AsyncWebClient(), incoming()) as task:
            await task

    with pytest.raises(ConnectionError):
        await turn()
