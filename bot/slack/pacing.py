"""How fast a budget hands out intermediate calls (refreshes): the window's allowance spread
over a horizon, not let through at once.

Slack counts each method in a sliding minute. What the window lets us make over the next
`HORIZON_SECONDS` is what is free now plus what leaves the window by then (`Window.free(within=H)`),
less the slots kept for finals. `Pace` spends that at an even rate, `allowance / H`, recomputed
at every grant, and never slower than the sustainable `limit / minute`. Why this shape:

* Even, not front-loaded. The token bucket before this let half the minute through at once (a
  wave of replies spent it in its first two seconds, while their texts were a few words long) and
  then paced at `limit / minute`: at Slack's floor of 100 appends, fourteen streams were each
  refreshed once every 8 s for the rest of their stream. Spread over the horizon, the same
  calls refresh every reply every couple of seconds, so what readers see is younger.
* It adapts without knowing how long replies stream. Recomputed as calls are made, the rate
  falls as the window fills (by `e^(-t/H)` while nothing leaves it), so a short wave gets most of
  the window and a long one still has some left later; when the window is full the rate is what
  leaves it, the sustainable rate. A horizon much shorter than a reply front-loads again (all of
  a minute in a few seconds, then frozen: measured worse), a much longer one leaves a short
  wave's budget unused. Replies stream for about 10-60 s; ten seconds is the short end of that.
* It never exceeds Slack's limit: the pace only delays a call, every call still needs a slot in
  the window (which keeps the finals' reserve), so the pace cannot cause a 429.
* A probe is not rushed. Where a learned rate has climbed above what is known to pass (the
  documented floor, or a rate proven good: `bot/slack/learned_rates.py`), the extra room is
  not counted in the allowance: it is reached at the sustainable pace only, as before, so a
  probe too far costs its one 429 late in a long stretch of load, not in the middle of a wave.

Finals and a reply's first words do not wait for the pace (the budget grants them first, within
the window): the pace shapes only the refreshes in between.
"""

from __future__ import annotations

HORIZON_SECONDS = 10.0


class Pace:
    """A token bucket whose refill rate is the window's allowance over the horizon."""

    def __init__(
        self,
        per_minute: int,
        window_seconds: float,
        burst: float,
        now: float,
        horizon: float = HORIZON_SECONDS,
    ) -> None:
        self.window_seconds = window_seconds
        self.horizon = horizon
        self.burst = burst
        self.sustainable = per_minute / window_seconds
        self.rate = self.sustainable
        self.tokens = burst
        self._refilled_at = now

    def resize(self, per_minute: int, burst: float | None = None) -> None:
        self.sustainable = per_minute / self.window_seconds
        self.rate = max(self.rate, self.sustainable)
        if burst is not None:
            self.burst = burst
            self.tokens = min(self.tokens, burst)

    def refill(self, now: float) -> None:
        """Tokens earned since the last refill, at the rate aimed at then."""
        self.tokens = min(self.burst, self.tokens + (now - self._refilled_at) * self.rate)
        self._refilled_at = now

    def aim(self, allowance: int, share: float = 1.0) -> None:
        """`allowance`: calls the window lets through over the horizon, beyond the reserve;
        `share`: the part of them this process may make (replicas share one window)."""
        self.rate = max(self.sustainable, allowance / self.horizon) * share

    @property
    def ready(self) -> bool:
        return self.tokens >= 1

    def wait(self) -> float:
        """Seconds until the next token."""
        return max(0.0, (1 - self.tokens) / self.rate)

    def spend(self) -> None:
        self.tokens -= 1
