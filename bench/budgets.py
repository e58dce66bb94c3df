"""Spend budgets under a burst (issue 29): 50 turns started at once against a budget with room
for 10.

    uv run python -m bench.budgets                 # SQLite and PostgreSQL
    uv run python -m bench.budgets --no-postgres
    PYTHONPATH=$PWD .venv/bin/python -m bench.budgets   # in a worktree (no `uv run` there)

The whole bot runs against the fake Slack (Slack's documented floors) and the fake model, with
a workspace budget in dollars in its policy file, the bot's own prices (`fake-model` is priced
like gpt-4o-mini) and `REPLY_TOKENS` 100. A warm-up turn measures what one call reserves (the
prompt the bot counts, plus `REPLY_TOKENS`); the fake model is then told to report exactly that
usage for every call, so a call's estimate is what it costs, and the budget is reloaded to
leave room for exactly ROOM more calls. Then TURNS mentions arrive at once, in channels of their
own.

Figures:
- calls started, turns answered and turns paused (target: ROOM started, the rest paused);
- spend recorded by the ledger against the limit (0 over), and against what the fake model
  reported for the calls it played, priced the same way (target: equal within 1%);
- the latency each model call gains from the budget: the time in `Spend.reserve` before the
  call plus `Spend.settle` after it, measured around those methods in this process for each
  call that started (target p99 <= 5 ms), with the lock waits of 50 turns at once included;
  apart, the time a refused reserve took before its turn paused.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from decimal import Decimal
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar, cast

from bot.spend.ledger import Spend
from bot.spend.prices import Prices
from bot.spend.standing import Reservation, usd_of
from tests.fakes.openai import MODEL, FakeOpenAI
from tests.fakes.slack import FakeSlack
from tests.harness import make_settings, start_bot, stop_bot
from tests.pg import temporary_database
from tests.spend_burst import leave_room, mention, workspace_policy

TURNS, ROOM, REPLY_TOKENS = 50, 10, 100
BUDGET = "bench-workspace"
T = TypeVar("T")


class Timings:
    """Wall time of each `Spend.reserve` and `Spend.settle` call of this process, while
    `on` (the methods are wrapped once, for the whole benchmark): per model call, its
    reserve plus its settle (`added`); apart, the reserves that were refused (no call)."""

    def __init__(self) -> None:
        self.reserve: list[float] = []
        self.settle: list[float] = []
        self.added: list[float] = []
        self.refused: list[float] = []
        self._held: dict[int, tuple[Reservation, float]] = {}
        self.on = False
        for name in ("reserve", "settle"):
            self._wrap(name)

    def clear(self) -> None:
        for values in (self.reserve, self.settle, self.added, self.refused):
            values.clear()
        self._held.clear()

    def _wrap(self, name: str) -> None:
        original = cast(Callable[..., Awaitable[Any]], getattr(Spend, name))

        @wraps(original)
        async def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            result = await original(*args, **kwargs)
            if self.on:
                self._took(name, args[1], result, time.perf_counter() - started)
            return result

        setattr(Spend, name, timed)

    def _took(self, name: str, argument: Any, result: Any, elapsed: float) -> None:
        if name == "reserve":
            self.reserve.append(elapsed)
            if isinstance(result, Reservation):
                self._held[id(result)] = (result, elapsed)
            else:
                self.refused.append(elapsed)
            return
        self.settle.append(elapsed)
        held = self._held.pop(id(argument), None)
        if held is not None:
            self.added.append(held[1] + elapsed)


TIMINGS = Timings()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def run(database_url: str, backend: str, folder: Path) -> dict[str, float]:
    slack, model = FakeSlack().start(), FakeOpenAI().start()
    timings = TIMINGS
    timings.clear()
    path = folder / "policy.yaml"
    path.write_text(workspace_policy(BUDGET, Decimal(1000)))
    bot = await start_bot(
        make_settings(slack, model, database_url, policy_file=path, reply_tokens=REPLY_TOKENS)
    )
    prices = Prices.load(None)
    try:
        room = await leave_room(bot, slack, model, path, BUDGET, ROOM, REPLY_TOKENS)
        played_before = len(model.played)
        timings.on = True
        started = time.monotonic()
        await asyncio.gather(
            *[mention(bot, slack, f"C{i:06d}", f"reply {i % 100:02d} please") for i in range(TURNS)]
        )
        await bot.idle(timeout=300)
        wall = time.monotonic() - started
        timings.on = False
        spend = bot.countersign.conversations.spending.ledger()
        assert spend is not None
        after = await spend.standing(BUDGET)
        assert after is not None
    finally:
        await stop_bot(bot)
        slack.stop()
        model.stop()
    played = model.played[played_before:]
    reported_nano = sum(prices.nano(MODEL, room.prompt, p.tokens) for p in played)
    paused = sum(
        1
        for i in range(TURNS)
        for card in slack.cards(f"C{i:06d}")
        if card.text.startswith("Budget reached")
    )
    spent = after.used_nano - room.used_before
    added = timings.added
    ms = 1000.0
    return {
        "turns": TURNS,
        "room (calls)": ROOM,
        "calls started": len(played),
        "turns paused with a card": paused,
        "calls beyond the room": max(0, len(played) - ROOM),
        "spend over the limit $": float(usd_of(max(0, after.used_nano - room.limit))),
        "spend recorded $": float(usd_of(spent)),
        "spend the model reported $": float(usd_of(reported_nano)),
        "recorded / reported": spent / reported_nano if reported_nano else float("nan"),
        "limit $": float(usd_of(room.limit - room.used_before)),
        "reserve p50 ms": pct(timings.reserve, 0.5) * ms,
        "reserve p99 ms": pct(timings.reserve, 0.99) * ms,
        "settle p50 ms": pct(timings.settle, 0.5) * ms,
        "settle p99 ms": pct(timings.settle, 0.99) * ms,
        "added per model call p50 ms": pct(added, 0.5) * ms,
        "added per model call p99 ms": pct(added, 0.99) * ms,
        "added per model call mean ms": statistics.mean(added) * ms if added else float("nan"),
        "model calls timed": len(added),
        "refused reserve p50 ms": pct(timings.refused, 0.5) * ms,
        "refused reserve p99 ms": pct(timings.refused, 0.99) * ms,
        "reservations timed": len(timings.reserve),
        "wall s": wall,
    }


def report(name: str, figures: dict[str, float]) -> None:
    print(f"\n== {name}: {TURNS} turns at once, a budget with room for {ROOM} calls")
    print(f"  load average at start        {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for key, value in figures.items():
        shown = (
            f"{value:.4f}"
            if "$" in key or "/" in key
            else (f"{value:.2f}" if isinstance(value, float) else str(value))
        )
        print(f"  {key:<30} {shown}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        sqlite = await run(f"sqlite:///{folder / 'bench.db'}", "SQLite", folder)
        report("SQLite", sqlite)
        if not args.no_postgres:
            async with temporary_database("cs_bench") as url:
                report("PostgreSQL", await run(url, "PostgreSQL", folder))


if __name__ == "__main__":
    asyncio.run(main())
