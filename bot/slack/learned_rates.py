"""Per-method rates learned from Slack's answers, not assumed.

Slack documents the streaming methods only as "Tier 4, 100+" (`chat.appendStream`) and "Tier 2,
20+" (`chat.startStream`, `chat.stopStream`); the real limits are unknown and may differ per
workspace. Each method's rate starts at the documented floor and moves with what Slack says:

* a stretch of `EPOCH_SECONDS` in which the method was saturated (calls were held back by its
  window or its pacing) and Slack refused nothing raises the rate (and, if the calls made filled
  the window, proves it good): by half while in the slow start (no 429 yet: a workspace that
  gives 300 appends a minute is found within a minute), by a tenth of the floor after that, and
  then only once every `PROBE_EVERY_SECONDS` (each probe above what Slack allows costs a 429 and
  its Retry-After, during which that method waits: probing slowly keeps those pauses rare);
* a 429 ends the slow start and takes the rate back to the last rate proven good (a probe too
  far), or halves it if it was refused at a rate already proven (the limit went down), but
  never below the documented floor on the strength of one refusal;
* one decrease per 429 *episode*: the 429s that arrive within `EPOCH_SECONDS` (or within the
  Retry-After, capped at `RETRY_AFTER_CAP_SECONDS`, if longer) of the one that counted are the
  same burst (thirty calls in flight are refused together: that is one signal, not thirty), and
  lower nothing more;
* below the floor only if 429s continue *at* the floor: a 429 counted at the floor is a strike,
  and only a further one, after that strike's window and within `CONTINUED_WITHIN_SECONDS` of
  it, halves the rate (at most down to a quarter of the floor). Once the 429s stop, a rate below
  the floor doubles every `RECOVER_STEP_SECONDS`: back at the floor within half a minute;
* never above `ceiling`.

That is TCP's congestion control (slow start, then additive increase and multiplicative
decrease, one decrease per round trip), with a memory of the last good rate so that a probe that
fails costs one 429, not a halving. Unsaturated time teaches nothing: a quiet workspace keeps its
rate. All times are this process's monotonic clock; no time crosses replicas.

With Redis the learned rates are shared by the replicas (one key per method and workspace): a
429 seen by one replica lowers the rate of all. A replica adopts only what changed since it
last looked, within the same bounds (never under a quarter of the floor or over the ceiling,
never a number that is not finite), and an adopted decrease starts the same quiet window and the
same recovery as one of its own: so no replica, whatever its clock or its code, can hold the
others under the floor for long. A rate under the floor is stored with a one-minute expiry
(Redis's clock), so a replica that starts later never picks up a stale low one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
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
# Slack's Retry-After is at most a minute (it counts a sliding minute); more is taken as this.
RETRY_AFTER_CAP_SECONDS = 60.0
# A 429 at the floor this long after the previous one's window ended means 429s continue.
CONTINUED_WITHIN_SECONDS = 60.0
# Below the floor, the rate doubles after this long without a 429 (a quarter of the floor is
# back at the floor within two steps).
RECOVER_STEP_SECONDS = 15.0
# A rate under the floor is kept in Redis this long (it is back at the floor by then).
BELOW_FLOOR_TTL_SECONDS = 60


def quiet_seconds(retry_after: float | None) -> float:
    """How long the 429s after one that counted belong to its episode: an epoch, or the
    Retry-After if longer (capped; a value that is not a number counts as none)."""
    if retry_after is None or not retry_after > 0:  # also NaN
        return EPOCH_SECONDS
    return max(EPOCH_SECONDS, min(RETRY_AFTER_CAP_SECONDS, retry_after))


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
    # 429s before this belong to the episode of the one that last counted.
    _quiet_until: float = field(init=False, default=float("-inf"))
    # A 429 counted at the floor (a strike): a further one before this takes the rate under it.
    _strike_until: float = field(init=False, default=float("-inf"))
    # The last 429 (or step back up) under the floor: recovery counts from here.
    _calm_since: float = field(init=False, default=float("-inf"))

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

    def refused(self, retry_after: float | None = None) -> None:
        """Slack answered 429 (`retry_after`: its Retry-After in seconds, if known). The first
        of an episode lowers the rate once: back to the last good rate, or half if that was
        refused too, not under the floor unless 429s continue at the floor (module doc)."""
        now = self.clock()
        self._refused = True  # this epoch raises nothing
        self._calm_since = now
        if now < self._quiet_until:
            return  # the same burst, or within its Retry-After: counted already
        self._quiet_until = now + quiet_seconds(retry_after)
        self.slow_start = False
        self._probed_at = now
        if self.rate > self.floor:
            if self.good is not None and self.good < self.rate:
                rate = self.good  # the probe went too far; what held before still holds
            else:
                rate = self.rate * DECREASE_FACTOR  # refused at a proven rate: it went down
                self.good = None
            self._set(max(float(self.floor), rate))
        else:
            if self.rate < self.floor or now < self._strike_until:
                self.good = None  # 429s continue at (or under) the floor: Slack gives less
                self._set(max(self.minimum, self.rate * DECREASE_FACTOR))
            self._strike_until = self._quiet_until + CONTINUED_WITHIN_SECONDS
        self._new_epoch()

    def tick(self) -> None:
        """Called every second or so. Under the floor, a step back up once the 429s stopped;
        at the end of an epoch, a saturated epoch without a 429 proves the rate good and, in
        the slow start or when a probe is due, raises it."""
        now = self.clock()
        if self.rate < self.floor and now - self._calm_since >= RECOVER_STEP_SECONDS:
            self._calm_since = now
            self._set(min(float(self.floor), self.rate * 2))
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
        """Another replica learned `rate`: take it as ours, within our bounds. A decrease starts
        our quiet window and recovery as if the 429 had been ours; while in that window no
        increase is taken (a replica that has not heard of the 429 yet)."""
        if not math.isfinite(rate):
            return
        rate = min(float(self.ceiling), max(self.minimum, rate))
        now = self.clock()
        if rate > self.rate and now < self._quiet_until:
            return
        if abs(rate - self.rate) < 0.5 and slow_start == self.slow_start:
            return
        self.slow_start = self.slow_start and slow_start
        if rate < self.rate:
            self._quiet_until = max(self._quiet_until, now + EPOCH_SECONDS)
            self._calm_since = self._probed_at = now
            if self.good is not None and self.good > rate:
                self.good = None
        self._set(rate, share=False)

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
    """The learned rates of one workspace in Redis, so that replicas learn together. Each
    replica adopts a stored rate only when it changed since it last read or wrote it: news,
    not state (a replica that recovered on its own is not dragged back by a stale value)."""

    def __init__(self, redis: Redis, prefix: str, rates: list[LearnedRate]) -> None:
        self.redis = redis
        self.prefix = prefix
        self.rates = {r.method: r for r in rates}
        self._writes: set[asyncio.Task[None]] = set()
        self._seen: dict[str, str] = {}
        for rate in rates:
            rate.on_change = self.publish

    def _key(self, method: str) -> str:
        return f"{self.prefix}:learned:{method}"

    def publish(self, rate: LearnedRate) -> None:
        value = f"{rate.rate:.3f}:{int(rate.slow_start)}"
        self._seen[rate.method] = value
        expiry = BELOW_FLOOR_TTL_SECONDS if rate.rate < rate.floor else 86_400
        task = asyncio.get_running_loop().create_task(self._write(rate.method, value, expiry))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _write(self, method: str, value: str, expiry: int) -> None:
        with contextlib.suppress(RedisError, OSError):
            await self.redis.set(self._key(method), value, ex=expiry)

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
            if self._seen.get(rate.method) == text:
                continue
            self._seen[rate.method] = text
            learned, _, slow = text.partition(":")
            with contextlib.suppress(ValueError):
                rate.adopt(float(learned), slow != "0")
