"""The bot's own cost in a benchmark: the bot runs with the fakes in one process, or in a
process of its own (`ProcessMeter`: its CPU and memory read from /proc/<pid>, nothing to
subtract).

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


def thread_cpu(native_id: int) -> float:
    """CPU seconds (user + system) a thread of this process has used so far."""
    stat = Path(f"/proc/self/task/{native_id}/stat").read_text()
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime (fields 14, 15)


def resident_mib(pid: str = "self") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


@dataclass
class CostMeter:
    """CPU of the process less the given threads' (the fakes'), and the peak resident memory
    above the level at `start`."""

    others: list[int]  # native thread ids not counted (the fakes' servers)
    _cpu0: float = 0.0
    _others0: float = 0.0
    rss0: float = 0.0
    peak: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)
    _sampler: threading.Thread | None = None
    _sampler_cpu: float = 0.0  # the sampler's own CPU, not counted either

    def _others_cpu(self) -> float:
        return sum(thread_cpu(t) for t in self.others)

    def start(self) -> None:
        self._cpu0, self._others0 = time.process_time(), self._others_cpu()
        self.rss0 = self.peak = resident_mib()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, resident_mib())
        self._sampler_cpu = time.thread_time()

    def stop(self) -> tuple[float, float, float]:
        """(the bot's CPU seconds, the fakes' CPU seconds, peak RSS growth in MiB)."""
        self._stop.set()
        if self._sampler is not None:
            self._sampler.join()
        others = self._others_cpu() - self._others0
        bot = time.process_time() - self._cpu0 - others - self._sampler_cpu
        return bot, others, self.peak - self.rss0


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) another process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


@dataclass
class ProcessMeter:
    """The CPU a bot process used over a stretch and its peak resident memory above the level
    at `start` (sampled every 20 ms)."""

    pid: int
    _cpu0: float = 0.0
    rss0: float = 0.0
    peak: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)
    _sampler: threading.Thread | None = None

    def start(self) -> None:
        self._cpu0 = process_cpu(self.pid)
        self.rss0 = self.peak = resident_mib(str(self.pid))
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, resident_mib(str(self.pid)))

    def stop(self) -> tuple[float, float]:
        """(the bot's CPU seconds, peak RSS growth in MiB)."""
        self._stop.set()
        if self._sampler is not None:
            self._sampler.join()
        return process_cpu(self.pid) - self._cpu0, self.peak - self.rss0


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
