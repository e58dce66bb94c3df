"""The bot's own cost in a benchmark: the bot runs with the fakes in one process, or in a
process of its own (`CostMeter(pid=…)`: its CPU and memory read from /proc/<pid>, nothing
to subtract).

The fakes (tests/fakes/server.py) each serve on a thread of their own; the bot runs on the
benchmark's event loop (plus the threads it starts: SQLite's, the default executor's). So the
bot's CPU over a stretch is the process's CPU (every thread, also those that ended) less what
the fakes' threads used, read from /proc/self/task/<tid>/stat (Linux). What is left also holds
the benchmark's own small share on the bot's loop: sending the signed events (one HTTP request
per reply). Resident memory is sampled every 20 ms from /proc/self/status; its growth over the
wave is the bot's plus what the fakes store of it (the messages and their timelines: kilobytes
per reply).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.fakes.openai import Received

TICKS = os.sysconf("SC_CLK_TCK")


def stat_cpu(stat: Path) -> float:
    """CPU seconds (user + system) in a /proc `stat` file (a process's or a thread's)."""
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime (fields 14, 15)


def thread_cpu(native_id: int) -> float:
    """CPU seconds a thread of this process has used so far."""
    return stat_cpu(Path(f"/proc/self/task/{native_id}/stat"))


def resident_mib(pid: str = "self") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


@dataclass
class CostMeter:
    """The bot's CPU over a stretch and its peak resident memory above the level at `start`
    (sampled every 20 ms). With `pid`, another process's (the bot in a process of its own);
    without, this process's less the given threads' (the fakes') and the sampler's own."""

    others: list[int] = field(default_factory=list)  # native thread ids not counted
    pid: int | None = None
    _cpu0: float = 0.0
    _others0: float = 0.0
    rss0: float = 0.0
    peak: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)
    _sampler: threading.Thread | None = None
    _sampler_cpu: float = 0.0  # the sampler's own CPU (this process only)

    def _cpu(self) -> float:
        return time.process_time() if self.pid is None else process_cpu(self.pid)

    def _rss(self) -> float:
        return resident_mib("self" if self.pid is None else str(self.pid))

    def _others_cpu(self) -> float:
        return sum(thread_cpu(t) for t in self.others)

    def start(self) -> None:
        self._cpu0, self._others0 = self._cpu(), self._others_cpu()
        self.rss0 = self.peak = self._rss()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, self._rss())
        if self.pid is None:
            self._sampler_cpu = time.thread_time()

    def stop(self) -> tuple[float, float, float]:
        """(the bot's CPU seconds, the given threads' CPU seconds, peak RSS growth in MiB)."""
        self._stop.set()
        if self._sampler is not None:
            self._sampler.join()
        others = self._others_cpu() - self._others0
        bot = self._cpu() - self._cpu0 - others - self._sampler_cpu
        return bot, others, self.peak - self.rss0


def process_cpu(pid: int) -> float:
    """CPU seconds another process has used so far."""
    return stat_cpu(Path(f"/proc/{pid}/stat"))


def first_requests(requests: Sequence[Received], prompts: Sequence[str]) -> list[float]:
    """When the fake model received the first request whose last user message holds each of
    `prompts` (time.monotonic())."""
    asked: dict[int, float] = {}
    for received in requests:
        users = [m for m in received.body.get("messages", []) if m.get("role") == "user"]
        last = str(users[-1].get("content", "")) if users else ""
        for i, prompt in enumerate(prompts):
            if prompt in last and i not in asked:
                asked[i] = received.at
    return [asked[i] for i in range(len(prompts))]
