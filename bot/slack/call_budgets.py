"""A budget for every Slack method the bot calls that no other budget paces.

Each method has a window (`bot.coordination.Window`, shared by the replicas through Redis) as
large as Slack's documented limit (`bot/slack/method_limits.py`), resized by a `LearnedRate`
where Slack documents a floor with "+"; `chat.postMessage` also has a token bucket per channel
(three at once, then one a second). A call takes a slot before it is sent:

* a method whose window is spent is not called until the window frees a slot (so a method
  gets at most the one 429 that teaches its rate, then waits): the caller waits, at most its
  patience (70 s by default, 2 s for a modal whose trigger expires), then gets `Spent`;
* cosmetic methods (the thread's status, its title, the DM's prompts) are never waited for:
  when their window is spent they are skipped at once, and a caller may keep a reserve free
  (`asking(keep_free=n)`: a `processing` status leaves room for the `active` that ends it);
* an optional read (`asking(skip=True)`) is skipped like a cosmetic call.

A 429 pauses the method (for `chat.postMessage`, the channel) for its Retry-After, on every
replica, and lowers its learned rate.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass

from bot.coordination import LocalBucket, Window
from bot.metrics import SLACK_CALLS_SKIPPED
from bot.slack.learned_rates import LearnedRate
from bot.slack.method_limits import (
    METHODS,
    Bucket,
    MethodLimit,
    limit_of,
)

log = logging.getLogger(__name__)

# Our clock and Slack's disagree by a request's travel time: a window holds a call this much
# longer than Slack does (a minute's window 1.5 s); a channel's bucket keeps 0.5 s of tokens
# unspent (`bot.coordination.buckets`: the rate stays Slack's, a burst's last call may wait).
MINUTE_WINDOW_SECONDS = 61.5
CHANNEL_MARGIN_SECONDS = 0.5
MAX_CHANNEL_WINDOWS = 2048  # the channels posted to lately; older ones are forgotten
SHORTEST_WAIT_SECONDS = 0.05

# (name within the workspace's keys, calls, seconds) -> a window
WindowMaker = Callable[[str, int, float], Window]
# (name within the workspace's keys, burst, seconds per token, margin) -> a token bucket
BucketMaker = Callable[[str, int, float, float], Window]


# The error of a call that was not made (`bot.slack.web_client.CallSkipped`).
BUDGET_SPENT = "budget_spent"


class Spent(Exception):
    """The method's budget is spent: the call was not made (skipped, or waited too long)."""

    def __init__(self, method: str, why: str) -> None:
        super().__init__(f"{method}: {why}")
        self.method = method
        self.why = why


@dataclass(frozen=True)
class Ask:
    """How the caller wants its calls treated when their budget is spent (see `asking`)."""

    skip: bool | None = None  # None: the method's default (cosmetic methods skip)
    # Slots the call must leave free in its window (a function: asked at the moment it takes).
    keep_free: int | Callable[[], int] = 0
    patience: float | None = None  # at most this long to wait (None: the method's)


_ASK: ContextVar[Ask | None] = ContextVar("slack_call_ask", default=None)


@contextlib.contextmanager
def asking(
    *,
    skip: bool | None = None,
    keep_free: int | Callable[[], int] = 0,
    patience: float | None = None,
) -> Iterator[None]:
    """The Slack calls made inside (in this task) are skipped rather than waited for (`skip`),
    leave `keep_free` slots, or wait at most `patience` seconds."""
    token = _ASK.set(Ask(skip, keep_free, patience))
    try:
        yield
    finally:
        _ASK.reset(token)


class CallBudgets:
    """The windows of one workspace's methods, made on first use."""

    def __init__(
        self,
        make_window: WindowMaker,
        clock: Callable[[], float] = time.monotonic,
        scale: float = 1.0,
        make_bucket: BucketMaker | None = None,
        overrides: Mapping[str, MethodLimit] | None = None,
    ) -> None:
        """`overrides`: limits Slack sets for this app in place of the documented ones
        (`method_limits.app_limits`), taken as they are."""
        self._make = make_window
        self._make_bucket = make_bucket or (
            lambda _name, burst, every, margin: LocalBucket(burst, every, margin, clock)
        )
        self._clock = clock
        # Every floor times this (`SLACK_CALL_BUDGET_SCALE`: a workspace known to allow more).
        self.scale = scale
        self.overrides = dict(overrides or {})
        self._windows: dict[str, Window] = {}
        self._channels: OrderedDict[tuple[str, str], Window] = OrderedDict()
        self.learned: dict[str, LearnedRate] = {}
        for method in METHODS:  # every known method's rate is learned from start
            limit = self._limit(method)
            assert limit is not None
            self._method_window(method, limit)
        self.skipped: dict[str, int] = {}
        self._pauses: set[asyncio.Task[None]] = set()
        self._paused_until: dict[str, float] = {}
        self.on_learn: Callable[[], None] | None = None  # a rate needs its epochs counted

    def _limit(self, method: str) -> MethodLimit | None:
        if method in self.overrides:
            return self.overrides[method]
        limit = limit_of(method)
        return None if limit is None else self._scaled(limit)

    def _scaled(self, limit: MethodLimit) -> MethodLimit:
        """The documented limit, times `scale`."""
        if self.scale == 1.0:
            return limit
        per_channel = limit.per_channel
        if per_channel is not None:
            per_channel = Bucket(
                math.ceil(per_channel.burst * self.scale), per_channel.every / self.scale
            )
        return dataclasses.replace(
            limit, per_minute=math.ceil(limit.per_minute * self.scale), per_channel=per_channel
        )

    def _method_window(self, method: str, limit: MethodLimit) -> Window:
        window = self._windows.get(method)
        if window is None:
            window = self._make(method, limit.per_minute, MINUTE_WINDOW_SECONDS)
            self._windows[method] = window
            if limit.learned:
                # Rates climb back to the floor, never above it: a probe past Slack's floor
                # would cost a 429 on calls that people wait for.
                self.learned[method] = LearnedRate(
                    method, limit.per_minute, limit.per_minute, window.resize, self._clock
                )
        return window

    def _channel_window(self, method: str, channel: str, bucket: Bucket) -> Window:
        key = (method, channel)
        window = self._channels.get(key)
        if window is None:
            window = self._make_bucket(
                f"{method}:{channel}", bucket.burst, bucket.every, CHANNEL_MARGIN_SECONDS
            )
            self._channels[key] = window
            while len(self._channels) > MAX_CHANNEL_WINDOWS:
                self._channels.popitem(last=False)
        else:
            self._channels.move_to_end(key)
        return window

    def windows_of(self, method: str, channel: str | None) -> list[tuple[str, Window]]:
        """The windows a call must take a slot in, by name (the channel's first), [] if
        none."""
        limit = self._limit(method)
        if limit is None:
            return []
        windows = []
        if limit.per_channel is not None and channel:
            window = self._channel_window(method, channel, limit.per_channel)
            windows.append((f"{method}:{channel}", window))
        windows.append((method, self._method_window(method, limit)))
        return windows

    async def _try(
        self, named: list[tuple[str, Window]], keep_free: int | Callable[[], int]
    ) -> float | None:
        """Take a slot in every window: 0.0 if done, else seconds until one may free (None: it
        never will, e.g. the reserve asked is larger than the window)."""
        now = self._clock()
        for name, _ in named:  # a window's own pause (shared by replicas) is checked by `take`
            paused = self._paused_until.get(name, 0.0) - now
            if paused > 0:
                return paused
        windows = [window for _, window in named]
        last = len(windows) - 1
        for i, window in enumerate(windows):
            keep = 0 if i < last else keep_free() if callable(keep_free) else keep_free
            granted, wait = await window.take(keep_free=keep)
            if not granted:
                # The call is not made: the slots it took in the windows before are freed (a
                # part skipped every 0.25 s emptied its channel's bucket, held its final back).
                for taken in windows[:i]:
                    await taken.give_back()
                return wait
        return 0.0

    async def admit(self, method: str, channel: str | None = None) -> None:
        """Wait for the method's budget (see the module's doc); `Spent` if the call must not
        be made."""
        limit = self._limit(method)
        windows = self.windows_of(method, channel)
        if limit is None or not windows:
            return
        ask = _ASK.get() or Ask()
        skip = limit.cosmetic if ask.skip is None else ask.skip
        patience = limit.patience if ask.patience is None else ask.patience
        deadline = self._clock() + patience
        while True:
            wait = await self._try(windows, ask.keep_free)
            if wait == 0.0:
                return
            self._saturated(method)
            if skip:
                self._skipped(method)
                raise Spent(method, "skipped: its budget is spent")
            delay = max(SHORTEST_WAIT_SECONDS, wait if wait is not None else 1.0)
            if self._clock() + delay > deadline:
                self._skipped(method)
                raise Spent(method, f"its budget stays spent for more than {patience:.0f} s")
            await asyncio.sleep(min(delay, 1.0))

    def _saturated(self, method: str) -> None:
        rate = self.learned.get(method)
        if rate is not None:
            rate.saturated(True)
            if self.on_learn is not None:
                self.on_learn()

    def _skipped(self, method: str) -> None:
        self.skipped[method] = self.skipped.get(method, 0) + 1
        SLACK_CALLS_SKIPPED.labels(method=method).inc()

    def rate_limited(self, method: str, seconds: float, channel: str | None = None) -> None:
        """Slack answered 429: pause the method (the channel's window for a per-channel
        limit) on every replica, and lower its learned rate."""
        rate = self.learned.get(method)
        if rate is not None:
            rate.refused(seconds)
            if self.on_learn is not None:
                self.on_learn()
        windows = self.windows_of(method, channel)
        if not windows:
            return
        # The channel's window if the method is counted per channel (the likelier cause).
        name, target = windows[0]
        # Known here at once (the shared window hears of it when the pause task has run).
        until = self._clock() + seconds
        self._paused_until[name] = max(self._paused_until.get(name, 0.0), until)
        if len(self._paused_until) > MAX_CHANNEL_WINDOWS:
            now = self._clock()
            self._paused_until = {k: v for k, v in self._paused_until.items() if v > now}
        with contextlib.suppress(RuntimeError):  # no running loop: nothing waits on it
            task = asyncio.get_running_loop().create_task(target.pause(seconds))
            self._pauses.add(task)
            task.add_done_callback(self._pauses.discard)

    def tick(self) -> None:
        for rate in self.learned.values():
            rate.tick()
