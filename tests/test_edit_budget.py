"""The shared chat.update budget: the window is never exceeded, finals go first, waiting
replies take turns, and a 429 pauses everyone. Windows are shortened to keep tests quick."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from bot.slack.edit_budget import EditBudget


@dataclass
class Editor:
    name: str
    wants_final: bool = False
    last_edit_at: float | None = None


async def test_grants_never_exceed_the_window_and_finals_always_land() -> None:
    budget = EditBudget(20, window_seconds=1.0)
    granted: list[tuple[float, str, bool]] = []
    editors = [Editor(f"e{i}") for i in range(6)]

    async def run(editor: Editor, edits: int) -> None:
        budget.open(editor)
        for n in range(edits):
            editor.wants_final = n == edits - 1
            await budget.acquire(editor)
            editor.last_edit_at = time.monotonic()
            granted.append((editor.last_edit_at, editor.name, editor.wants_final))
        budget.close(editor)

    await asyncio.wait_for(asyncio.gather(*[run(e, 8) for e in editors]), 20)
    await budget.stop()
    times = [t for t, _, _ in granted]
    for i, start in enumerate(times):
        in_window = [t for t in times[i:] if t < start + 1.0]
        assert len(in_window) <= 20
    assert sum(1 for _, _, final in granted if final) == 6


async def test_final_edits_go_before_intermediate_ones() -> None:
    budget = EditBudget(4, burst=4, headroom=0, window_seconds=2.0)
    busy = Editor("busy")
    budget.open(busy)
    for _ in range(3):  # spend what the reserve allows
        await budget.acquire(busy)
    order: list[str] = []
    waiting = Editor("waiting")
    finishing = Editor("finishing")
    budget.open(finishing)

    async def take(editor: Editor) -> None:
        await budget.acquire(editor)
        order.append(editor.name)

    intermediate = asyncio.create_task(take(waiting))
    await asyncio.sleep(0.05)
    assert order == []  # the last slot is reserved for an open reply's final edit
    finishing.wants_final = True
    budget.poke()
    await asyncio.wait_for(take(finishing), 1)
    assert order == ["finishing"]
    intermediate.cancel()
    await budget.stop()


@dataclass
class Card:
    name: str
    wants_final: bool = True
    last_edit_at: float | None = None
    lane: str = "card"


async def test_card_edits_and_reply_finals_take_turns() -> None:
    """A click storm queues many card edits before a few replies finish: the replies' final
    texts are not served last, and the cards keep moving too."""
    budget = EditBudget(100, headroom=0, window_seconds=10.0)
    order: list[str] = []
    budget.pause(0.3)  # hold every grant until all have queued

    async def take(editor: Editor | Card) -> None:
        await budget.acquire(editor)
        order.append(editor.name)

    waiting = [asyncio.create_task(take(Card(f"card{i}"))) for i in range(10)]
    await asyncio.sleep(0)
    replies = [Editor(f"reply{i}", wants_final=True) for i in range(3)]
    for reply in replies:
        budget.open(reply)
    waiting += [asyncio.create_task(take(reply)) for reply in replies]
    await asyncio.wait_for(asyncio.gather(*waiting), 5)
    await budget.stop()
    assert order[:6] == ["card0", "reply0", "card1", "reply1", "card2", "reply2"]
    assert order[6:] == [f"card{i}" for i in range(3, 10)]


async def test_the_reply_refreshed_longest_ago_goes_next() -> None:
    budget = EditBudget(100, burst=1, headroom=0, window_seconds=10.0)
    fresh = Editor("fresh", last_edit_at=time.monotonic())
    stale = Editor("stale", last_edit_at=time.monotonic() - 5)
    never = Editor("never")
    await budget.acquire(Editor("spends-the-burst"))
    order: list[str] = []

    async def take(editor: Editor) -> None:
        await budget.acquire(editor)
        order.append(editor.name)

    await asyncio.wait_for(asyncio.gather(take(fresh), take(stale), take(never)), 5)
    assert order == ["never", "stale", "fresh"]
    await budget.stop()


async def test_edits_are_spread_over_the_horizon_and_keep_the_finals_reserve() -> None:
    """A shortened minute (6 s, so a 1 s horizon): five replies asking for an edit as often as
    they may get a fifth of their edits in the first fifth of the wave, not most of them, and
    the slots kept for their finals stay free for the finals."""
    budget = EditBudget(60, window_seconds=6.0)  # keeps 5 + 6 slots for finals
    start = time.monotonic()
    editors = [Editor(f"e{i}", last_edit_at=start) for i in range(5)]
    for editor in editors:
        budget.open(editor)
    granted: list[float] = []

    async def refresh(editor: Editor) -> None:
        while time.monotonic() < start + 1.5:
            await budget.acquire(editor)
            editor.last_edit_at = time.monotonic()
            granted.append(editor.last_edit_at - start)
            await asyncio.sleep(0.02)

    await asyncio.wait_for(asyncio.gather(*[refresh(e) for e in editors]), 5)
    early = [t for t in granted if t < 0.3]
    assert len(granted) >= 20
    assert len(early) <= 0.4 * len(granted), (len(early), len(granted))
    assert len(granted) <= 60 - 11
    for editor in editors:  # every final still lands at once
        editor.wants_final = True
    await asyncio.wait_for(asyncio.gather(*[budget.acquire(e) for e in editors]), 1)
    await budget.stop()


async def test_a_429_pauses_every_reply_for_retry_after() -> None:
    budget = EditBudget(100, window_seconds=10.0)
    budget.pause(0.4)
    started = time.monotonic()
    await asyncio.gather(budget.acquire(Editor("a")), budget.acquire(Editor("b", True)))
    assert time.monotonic() - started >= 0.39
    assert budget.rate_limited_total == 1
    await budget.stop()


async def test_a_reply_keeps_to_its_final_while_replies_open_faster_than_the_window_ends_them() -> (
    None
):
    """Every refresh of a scarce window is a reply that cannot go as edits (one post and its
    final edit) and goes in parts (two posts): a refresh waits, the final goes at once, and a
    reply whose text is stale is still refreshed. At rest a refresh goes as before."""
    budget = EditBudget(20, window_seconds=6.0)  # a horizon of 1 s, stale after 2 s
    now = time.monotonic()
    replies = [Editor(f"r{i}", last_edit_at=now) for i in range(4)]
    for reply in replies:
        budget.open(reply)  # 4 in a second: 24 finals a window, more than its 20 slots
    refresh = asyncio.create_task(budget.acquire(replies[0]))
    await asyncio.sleep(0.3)
    assert not refresh.done()
    replies[0].wants_final = True
    budget.poke()
    await asyncio.wait_for(refresh, 1)
    replies[1].last_edit_at = now - 3  # its text is older than the stale limit
    await asyncio.wait_for(budget.acquire(replies[1]), 1)
    await budget.stop()

    at_rest = EditBudget(20, window_seconds=6.0)
    reply = Editor("alone", last_edit_at=time.monotonic())
    at_rest.open(reply)
    await asyncio.wait_for(at_rest.acquire(reply), 1)
    await at_rest.stop()
