"""Per-method rates learned from Slack's answers, not assumed.

Slack documents the streaming methods only as "Tier 4, 100+" (`chat.appendStream`) and "Tier 2,
20+" (`chat.startStream`, `chat.stopStream`); the real limits are unknown and may differ per
workspace. Each method's rate starts at the documented floor and moves with what Slack says:

* a stretch of `EPOCH_SECONDS` in which the method was saturated (calls were held back by its
  window or its pacing) and Slack refused nothing raises the rate (and, if the calls made filled
  the window, proves it good): by half
  while in the slow start (no 429 yet: a workspace that gives 300 appends a minute is found
  within a minute), by a tenth of the floor after that, and then only once every
  `PROBE_EVERY_SECONDS` (each probe above what Slack allows costs a 429 and its Retry-After,
  during which that method waits: probing slowly keeps those pauses rare);
* a 429 ends the slow start and takes the rate back to the last rate proven good (a probe too
  far), or halves it if it was refused at a rate already proven (the limit went down), never
  below a quarter of the floor;
* never above `ceiling`.

That is TCP's congestion control (slow start, then additive increase and multiplicative
decrease), with a memory of the last good rate so that a probe that fails costs one 429, not a
halving. Unsaturated time teaches nothing: a quiet workspace keeps its rate. With Redis the
learned rates are shared by the replicas (one key per method and workspace): a 429 seen by one
replica lowers the rate of all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from redis.asyncio import Redis
from redis.exceptions import RedisError

from bot.metrics import SLACK_LEARNED_RATE

log = logging.getLogger(__name__)

EPOCH_SECONDS = 20.0
PROBE_EVERY_SECONDS = 300.0
SLOW_START_FACTOR = 1.5
DECREASE_FACTOR = 0.5
SHARE_EVERY_SECONDS = 5.0


@dataclass
class LearnedRate:
    """One method's calls per minute, as learned so far."""

    method: str
    floor: int
    ceiling: int
    apply: Callable[[int], None]  # resize the method's window (and its pacing)
    clock: Callable[[], float] = time.monotonic
    on_change: Callable[[LearnedRate], None] | None = None  # share it (with other replicas)
    rate: float = field(init=False)
    slow_start: bool = field(init=False, default=True)
    _epoch_started: float = field(init=False)
    _saturated: bool = field(init=False, default=False)
    _refused: bool = field(init=False, default=False)
    _full: bool = field(init=False, default=False)
    good: float | None = field(init=False, default=None)  # held a saturated epoch, no 429
    _probed_at: float = field(init=False, default=float("-inf"))

    def __post_init__(self) -> None:
        self.rate = float(self.floor)
        self._epoch_started = self.clock()
        SLACK_LEARNED_RATE.labels(method=self.method).set(self.rate)

    @property
    def minimum(self) -> float:
        return max(1.0, self.floor / 4)

    @property
    def limit(self) -> int:
        """Calls the method's window may hold in a minute now."""
        return max(1, int(self.rate))

    @property
    def trusted(self) -> int:
        """Calls a minute known to pass: the documented floor, or a rate proven good (the
        rest of `limit` is a probe)."""
        return min(self.limit, max(self.floor, int(self.good or 0)))

    def saturated(self, window_full: bool = True) -> None:
        """A call waited: the rate is what limits us. `window_full`: the calls made reached
        the rate (only then does a quiet epoch prove that Slack takes it)."""
        self._saturated = True
        self._full = self._full or window_full

    def refused(self) -> None:
        """Slack answered 429: back to the last good rate, or half if that was refused too;
        from now on probe slowly."""
        self._refused = True
        self.slow_start = False
        if self.good is not None and self.good < self.rate:
            rate = self.good  # the probe went too far; what held before still holds
        else:
            rate = self.rate * DECREASE_FACTOR  # refused at a proven rate: the limit went down
            self.good = None
        self._probed_at = self.clock()
        self._set(max(self.minimum, rate))
        self._new_epoch()

    def tick(self) -> None:
        """At the end of an epoch: a saturated epoch without a 429 proves the rate good and,
        in the slow start or when a probe is due, raises it."""
        now = self.clock()
        if now - self._epoch_started < EPOCH_SECONDS:
            return
        if self._saturated and not self._refused:
            if self._full:
                self.good = max(self.good or 0.0, self.rate)
            if self.slow_start:
                step = self.rate * (SLOW_START_FACTOR - 1)
            elif now - self._probed_at >= PROBE_EVERY_SECONDS:
                step = self.floor / 10
                self._probed_at = now
            else:
                step = 0.0
            if step:
                self._set(min(float(self.ceiling), self.rate + max(1.0, step)))
        self._new_epoch()

    def adopt(self, rate: float, slow_start: bool) -> None:
        """Another replica learned `rate`: take it as ours."""
        if abs(rate - self.rate) >= 0.5 or slow_start != self.slow_start:
            self.slow_start = self.slow_start and slow_start
            self._set(min(float(self.ceiling), max(self.minimum, rate)), share=False)

    def _new_epoch(self) -> None:
        self._epoch_started = self.clock()
        self._saturated = self._refused = self._full = False

    def _set(self, rate: float, share: bool = True) -> None:
        if rate == self.rate:
            return
        log.info("learned rate of %s: %.0f -> %.0f a minute", self.method, self.rate, rate)
        self.rate = rate
        SLACK_LEARNED_RATE.labels(method=self.method).set(rate)
        self.apply(self.limit)
        if self.on_change is not None and share:
            self.on_change(self)


class SharedRates:
    """The learned rates of one workspace in Redis, so that replicas learn together."""

    def __init__(self, redis: Redis, prefix: str, rates: list[LearnedRate]) -> None:
        self.redis = redis
        self.prefix = prefix
        self.rates = {r.method: r for r in rates}
        self._writes: set[asyncio.Task[None]] = set()
        for rate in rates:
            rate.on_change = self.publish

    def _key(self, method: str) -> str:
        return f"{self.prefix}:learned:{method}"

    def publish(self, rate: LearnedRate) -> None:
        task = asyncio.get_running_loop().create_task(self._write(rate))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _write(self, rate: LearnedRate) -> None:
        value = f"{rate.rate:.3f}:{int(rate.slow_start)}"
        with contextlib.suppress(RedisError, OSError):
            await self.redis.set(self._key(rate.method), value, ex=86_400)

    async def refresh(self) -> None:
        """Adopt what the other replicas learned (Redis down: keep our own)."""
        try:
            values = await self.redis.mget([self._key(m) for m in self.rates])
        except (RedisError, OSError):
            return
        for rate, value in zip(self.rates.values(), values, strict=True):
            if not value:
                continue
            text = value.decode() if isinstance(value, bytes) else str(value)
            learned, _, slow = text.partition(":")
            with contextlib.suppress(ValueError):
                rate.adopt(float(learned), slow != "0")
