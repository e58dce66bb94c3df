"""The main event loop's sign of life, and keeping start-up objects out of the collector's way.

The HTTP front door answers Slack from its own thread; it asks `silent_for()` before promising
work, because an acknowledgement from a process whose main loop is wedged would be a lie.
"""

from __future__ import annotations

import asyncio
import gc
import time

from bot.metrics import sample_loop_lag


class Heartbeat:
    def __init__(self) -> None:
        self.alive_at = time.monotonic()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.alive_at = time.monotonic()
        self._task = asyncio.get_running_loop().create_task(
            sample_loop_lag(self._tick), name="heartbeat"
        )

    def _tick(self, now: float) -> None:
        self.alive_at = now

    def silent_for(self) -> float:
        """Seconds since the main loop last ran a timer (read from any thread)."""
        return time.monotonic() - self.alive_at

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()


def freeze_start_up_objects() -> None:
    """Everything made so far (modules, the app's long-lived objects, the token encoding) lives
    as long as the process: take it out of the collector's reach. Full collections walked it
    every few seconds under load and stopped the process for 200-400 ms each time (measured
    with gc.callbacks during bench/load), acknowledgements included."""
    gc.collect()
    gc.freeze()
