"""The bot under bench/stream.py, two ways.

- `InProcess`: on the benchmark's own event loop, beside the fakes' server threads (they share
  one interpreter lock); its CPU is the process's less the fakes' threads' (bench/bot_cost.py).
- `OwnProcess`: `countersign serve` as a process of its own, as in production (Slack and the
  model are elsewhere); events are signed and posted to its HTTP front door, and its CPU and
  memory are read from /proc/<pid>.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

from bench.bot_cost import CostMeter
from bench.processes import bot_env, start_processes, stop_processes
from tests.fakes.openai import FakeOpenAI
from tests.fakes.slack import FakeSlack
from tests.harness import RunningBot, SlackFront, make_settings, start_bot, stop_bot

Done = Callable[[], bool]


class InProcess:
    """The bot on this process's loop (tests/harness.py `start_bot`)."""

    def __init__(self, fakes: list[int]) -> None:
        self.bot: RunningBot | None = None
        self.meter = CostMeter(fakes)  # the fakes' threads' CPU is not the bot's

    async def start(self, slack: FakeSlack, model: FakeOpenAI, tmp: Path, streaming: str) -> None:
        url = f"sqlite:///{tmp / 'bench.db'}"
        self.bot = await start_bot(make_settings(slack, model, url, streaming=streaming))

    async def send(self, event: dict[str, Any]) -> None:
        assert self.bot is not None
        await self.bot.send_event(event)

    async def idle(self, _done: Done, within: float) -> None:
        assert self.bot is not None
        await self.bot.idle(timeout=within)

    def measure(self) -> None:
        self.meter.start()

    def measured(self) -> tuple[float, float, float]:
        """(the bot's CPU s, the fakes' CPU s, peak RSS growth MiB)."""
        return self.meter.stop()

    def learned(self) -> dict[str, float]:
        assert self.bot is not None
        budgets = self.bot.countersign.budgets
        return {m: r.limit for m, r in (budgets.learned.items() if budgets is not None else [])}

    async def stop(self, _tmp: Path) -> None:
        if self.bot is not None:
            await stop_bot(self.bot)


class OwnProcess:
    """`countersign serve` as a process of its own (bench/processes.py)."""

    def __init__(self) -> None:
        self.processes: list[Any] = []
        self.session: aiohttp.ClientSession | None = None
        self.front: SlackFront | None = None
        self.meter: CostMeter | None = None
        self._fakes_cpu0 = 0.0

    async def start(self, slack: FakeSlack, model: FakeOpenAI, tmp: Path, streaming: str) -> None:
        env = bot_env(slack, model, f"sqlite:///{tmp / 'bench.db'}", None)
        # As the in-process bot is set up (tests/harness.py make_settings): titles from the
        # first words, not a model call each.
        env.update(STREAMING=streaming, TITLE_MODEL="off")
        self.processes = await start_processes(1, env, tmp)
        self.session = aiohttp.ClientSession()
        self.front = SlackFront(f"http://127.0.0.1:{self.processes[0][1]}", self.session)
        self.meter = CostMeter(pid=self.processes[0][0].pid)

    async def send(self, event: dict[str, Any]) -> None:
        assert self.front is not None
        await self.front.send_event(event)

    async def idle(self, done: Done, within: float) -> None:
        """Until `done` holds (every reply's exact final shown, no stream open)."""
        deadline = time.monotonic() + within
        while not done():
            if time.monotonic() > deadline:
                raise TimeoutError("the bot process did not finish its replies")
            await asyncio.sleep(0.1)

    def measure(self) -> None:
        assert self.meter is not None
        self.meter.start()
        self._fakes_cpu0 = time.process_time()

    def measured(self) -> tuple[float, float, float]:
        assert self.meter is not None
        cpu, _, rss = self.meter.stop()
        return cpu, time.process_time() - self._fakes_cpu0, rss

    def learned(self) -> dict[str, float]:
        return {}  # inside the process; its /metrics has the 429s if any

    async def stop(self, tmp: Path) -> None:
        if self.session is not None:
            await self.session.close()
        if self.processes:
            await asyncio.to_thread(stop_processes, self.processes, tmp)


def fake_threads(before: set[int | None]) -> list[int]:
    return [t.native_id for t in threading.enumerate() if t.native_id not in before and t.native_id]
