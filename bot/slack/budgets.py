"""Every Slack budget a live reply spends, owned by one scheduler per workspace.

| method | Slack tier | who spends it |
|---|---|---|
| `chat.update` | Tier 3, ~50/min | replies sent as edits, approval cards |
| `chat.appendStream` | Tier 4, 100+/min | natively streamed replies |
| `chat.startStream`, `.stopStream` | Tier 2, ~20/min each | a start and a stop per native reply |

`chat.update` and `chat.appendStream` each go through an `EditBudget` (final texts first, then
the reply refreshed longest ago, never more than the window allows). Starts and stops go
through `StreamSlots`: a reply streams natively only if a start is free now and a stop will be
free for it and for every native reply still open; otherwise (in `auto`) it uses edits. A 429
pauses the method that got it and no other. With Redis, every window is shared by the replicas.
Every other method the bot calls has its budget in `calls` (`bot/slack/call_budgets.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass

from redis.asyncio import Redis

from bot.coordination import Breaker, LocalBucket, LocalWindow, RedisBucket, RedisWindow, Window
from bot.shared_counts import SharedCount
from bot.slack.call_budgets import CallBudgets
from bot.slack.edit_budget import WINDOW_MARGIN_SECONDS, WINDOW_SECONDS, EditBudget
from bot.slack.learned_rates import SHARE_EVERY_SECONDS, LearnedRate, SharedRates
from bot.slack.method_limits import app_limits
from bot.slack.parts_choice import OwedFinals
from bot.slack.stream_slots import START, STOP, StreamSlots

APPEND = "chat.appendStream"
UPDATE = "chat.update"


@dataclass
class Limits:
    """Where each method's learned rate starts (Slack's documented floors by default)."""

    edits_per_minute: int = 50
    appends_per_minute: int = 100
    starts_per_minute: int = 20
    calls_scale: float = 1.0  # every other method's documented floor times this
    history_tier: int = 3  # conversations.replies / .history: Tier 3, or Tier 1 for some apps


# How far above where it started a method's learned rate may climb. `chat.update` does not
# probe upwards: it carries the finals of replies sent as edits and of cards, and a probe's 429
# would hold every one of them for its Retry-After (measured: finals 4-6 s late); a 429 still
# lowers it. Starts and stops do not probe either: each probe past Slack's real limit costs a
# 429 (measured: one `chat.startStream` 429 in every sustained-load run), and a start refused
# sends a reply to edits anyway. Appends probe: a refused append only delays refreshes (the
# final goes with the stop), and a workspace that allows more refreshes every reply more often.
CEILINGS = {UPDATE: 1, APPEND: 6, START: 1, STOP: 1}
LEARN_EVERY_SECONDS = 1.0


class WorkspaceBudgets:
    """The scheduler of one workspace: every method's budget, the rates learned for them,
    and who gets to call next."""

    def __init__(
        self,
        limits: Limits,
        redis: Redis | None = None,
        workspace_key: str = "",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        seconds = WINDOW_SECONDS + WINDOW_MARGIN_SECONDS
        digest = hashlib.sha256(workspace_key.encode()).hexdigest()[:16]
        prefix = f"countersign:{{method}}:{digest}"

        # One breaker for all the workspace's windows: a hung Redis costs one time-out, not
        # one per method (there is a window for every method the bot calls).
        breaker = Breaker()

        def named_window(name: str, limit: int, seconds: float) -> Window:
            if redis is None:
                return LocalWindow(limit, seconds, clock)
            shared = RedisWindow(redis, prefix.format(method=name), limit, seconds)
            shared.breaker = breaker
            return shared

        def named_bucket(name: str, burst: int, every: float, margin: float) -> Window:
            if redis is None:
                return LocalBucket(burst, every, margin, clock)
            # Its own key (`:bucket`): a replica of an older release keeps a sliding window
            # (a sorted set) under the window's name, and each would fail on the other's type.
            key = f"{prefix.format(method=name)}:bucket"
            shared = RedisBucket(redis, key, burst, every, margin)
            shared.breaker = breaker
            return shared

        def window(method: str, limit: int) -> Window:
            return named_window(method, limit, seconds)

        self.limits = limits
        self.edits = EditBudget(
            limits.edits_per_minute, clock=clock, window=window(UPDATE, limits.edits_per_minute)
        )
        self.appends = EditBudget(
            limits.appends_per_minute,
            clock=clock,
            window=window(APPEND, limits.appends_per_minute),
            reserve_finals=False,  # a native final goes with the stop, not an append
        )
        self.streams = StreamSlots(
            window(START, limits.starts_per_minute), window(STOP, limits.starts_per_minute), clock
        )
        # The reserves for finals count every replica's replies (`bot/shared_counts.py`).
        self.owed_finals = OwedFinals()
        if redis is not None:
            counted = f"countersign:counts:{digest}"
            self.edits.open_replies = SharedCount(redis, f"{counted}:open-edits", breaker)
            self.edits.demand.count = SharedCount(redis, f"{counted}:edits-opened", breaker)
            self.appends.open_replies = SharedCount(redis, f"{counted}:open-appends", breaker)
            self.owed_finals = OwedFinals(SharedCount(redis, f"{counted}:owed-finals", breaker))
        floors = {
            UPDATE: (limits.edits_per_minute, self.edits.resize),
            APPEND: (limits.appends_per_minute, self.appends.resize),
            START: (limits.starts_per_minute, self.streams.starts.resize),
            STOP: (limits.starts_per_minute, self.streams.stops.resize),
        }
        self.learned = {
            method: LearnedRate(method, floor, floor * CEILINGS[method], apply, clock)
            for method, (floor, apply) in floors.items()
        }
        self.calls = CallBudgets(
            named_window, clock, limits.calls_scale, named_bucket, app_limits(limits.history_tier)
        )
        self.calls.on_learn = self._keep_learning
        rates = [*self.learned.values(), *self.calls.learned.values()]
        self.shared = (
            SharedRates(redis, f"countersign:rates:{digest}", rates) if redis is not None else None
        )
        self.edits.trusted = lambda: self.learned[UPDATE].trusted
        self.appends.trusted = lambda: self.learned[APPEND].trusted
        self.edits.on_saturated = functools.partial(self._saturated, UPDATE)
        self.appends.on_saturated = functools.partial(self._saturated, APPEND)
        self.streams.on_saturated = self._saturated
        self._learning: asyncio.Task[None] | None = None

    def _saturated(self, method: str, window_full: bool) -> None:
        self.learned[method].saturated(window_full)
        self._keep_learning()

    def _keep_learning(self) -> None:
        """The epochs are counted (and other replicas' rates read) while this process runs."""
        if self._learning is None or self._learning.done():
            with contextlib.suppress(RuntimeError):  # no running loop: nothing to learn yet
                self._learning = asyncio.get_running_loop().create_task(
                    self._learn(), name="learned-rates"
                )

    async def _learn(self) -> None:
        shared_at = 0.0
        while not self.streams.closed:
            for rate in self.learned.values():
                rate.tick()
            self.calls.tick()
            if self.shared is not None and time.monotonic() - shared_at >= SHARE_EVERY_SECONDS:
                shared_at = time.monotonic()
                await self.shared.refresh()
            await asyncio.sleep(LEARN_EVERY_SECONDS)

    def rate_limited(self, method: str, seconds: float, channel: str | None = None) -> None:
        """Slack answered 429 to `method`: pause that method only (`chat.postMessage`: in
        that channel), and lower its rate."""
        if method not in self.learned:
            self.calls.rate_limited(method, seconds, channel)
            return
        self.learned[method].refused(seconds)
        self._keep_learning()
        if method == UPDATE:
            self.edits.pause(seconds)
        elif method == APPEND:
            self.appends.pause(seconds)
        elif method in (START, STOP):
            self.streams.pause(method, seconds)

    async def stop(self) -> None:
        self.streams.closed = True
        if self._learning is not None:
            self._learning.cancel()
            await asyncio.gather(self._learning, return_exceptions=True)
        await self.edits.stop()
        await self.appends.stop()
        await self.edits.open_replies.stop()
        await self.appends.open_replies.stop()
        await self.owed_finals.count.stop()
