"""The fake Slack's rate limits: a sliding window (`Limit`) or a token bucket (`Bucket`), per
workspace or per channel, and `RateLimits`, which counts the calls against them. A call refused
by one of its limits is counted by none; the refusal says when the call would be allowed (the
fake's Retry-After is that, rounded up to whole seconds)."""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass
from typing import Any


@dataclass
class Limit:
    """`calls` per `per_seconds`, counted per workspace or per channel (sliding window)."""

    calls: int
    per_seconds: float = 60.0
    per_channel: bool = False


@dataclass
class Bucket:
    """A token bucket, per workspace or per channel: `burst` calls at once (it starts full),
    then one token back every `every` seconds (Slack's `chat.postMessage`: "1 per second per
    channel, short bursts >1 allowed")."""

    burst: int
    every: float = 1.0
    per_channel: bool = False


AnyLimit = Limit | Bucket
MethodLimits = AnyLimit | tuple[AnyLimit, ...]


class RateLimits:
    """What each limit has counted so far."""

    def __init__(self) -> None:
        self._windows: dict[tuple[str, int, str], deque[float]] = defaultdict(deque)
        # key -> (tokens, when they were counted)
        self._buckets: dict[tuple[str, int, str], tuple[float, float]] = {}

    def check(
        self, method: str, limits: MethodLimits | None, args: dict[str, Any], now: float
    ) -> float | None:
        """Seconds until the call would be allowed, or None (then it is counted)."""
        if limits is None:
            return None
        scope = str(args.get("channel") or args.get("channel_id") or "")
        admitted: list[tuple[tuple[str, int, str], AnyLimit]] = []
        for i, each in enumerate(limits if isinstance(limits, tuple) else (limits,)):
            key = (method, i, scope if each.per_channel else "*")
            wait = self._wait(key, each, now)
            if wait is not None:
                return wait
            admitted.append((key, each))
        for key, each in admitted:
            if isinstance(each, Bucket):
                self._buckets[key] = (self._tokens(key, each, now) - 1, now)
            else:
                self._windows[key].append(now)
        return None

    def _tokens(self, key: tuple[str, int, str], bucket: Bucket, now: float) -> float:
        tokens, at = self._buckets.get(key, (float(bucket.burst), now))
        return min(float(bucket.burst), tokens + max(0.0, now - at) / bucket.every)

    def _wait(self, key: tuple[str, int, str], limit: AnyLimit, now: float) -> float | None:
        if isinstance(limit, Bucket):
            tokens = self._tokens(key, limit, now)
            return None if tokens >= 1 else (1 - tokens) * limit.every
        window = self._windows[key]
        while window and window[0] <= now - limit.per_seconds:
            window.popleft()
        if len(window) >= limit.calls:
            return window[0] + limit.per_seconds - now
        return None
