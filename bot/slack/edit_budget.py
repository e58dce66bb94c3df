"""One `chat.update` budget per workspace, shared fairly by every live reply.

Slack allows about 50 `chat.update` calls per minute per workspace, and an app that keeps
hitting 429 risks being disabled. These rules decide who may edit next:

* the window: never more than `per_minute` grants in any minute (plus a safety margin), the way
  Slack counts;
* finals first: a reply's final edit goes before any intermediate one, and intermediate edits
  leave one slot per open reply in reserve, plus a little headroom for replies about to start,
  so that every reply can always land its final text;
* lanes take turns: final edits come from replies and from approval cards (`lane`); when both
  wait, they alternate, so a storm of clicks cannot hold every reply's final text back (seen:
  20 of 214 replies finished in bench/load while 3,000 card edits queued ahead) and a stream
  of replies cannot freeze the cards;
* first words next: a reply's first call (it has never been refreshed) needs only room in the
  window, so a wave of new replies each shows its first words at once; the words replacing a
  "Thinking…" (posted only when an edit could be spared for it) may also use the headroom;
* scarcity: while the window will be asked for more finals over its next minute than it holds,
  a reply keeps to its final edit (`bot/slack/edit_demand.py`): each refresh would cost a
  reply sent as edits, sent in parts instead (one more post);
* pacing: the other intermediate calls are spread evenly over what the window allows in the
  next few seconds (`bot/slack/pacing.py`); among waiting replies the one whose text was
  refreshed longest ago goes first.

A 429 (reported by `RateLimitNotifier`) pauses everyone until `Retry-After` has passed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from bot.coordination import LocalWindow, Window
from bot.shared_counts import Count, LocalCount
from bot.slack.edit_demand import STALE_SECONDS, EditDemand
from bot.slack.edit_waiters import BudgetClosed as BudgetClosed
from bot.slack.edit_waiters import Editor as Editor
from bot.slack.edit_waiters import WaiterQueue, lane_of
from bot.slack.pacing import HORIZON_SECONDS, Pace

WINDOW_SECONDS = 60.0
WINDOW_MARGIN_SECONDS = 1.5  # our clock and Slack's disagree by the request's travel time


class EditBudget(WaiterQueue):
    def __init__(
        self,
        per_minute: int = 50,
        *,
        burst: int | None = None,
        headroom: int | None = None,
        reserve_finals: bool = True,
        window_seconds: float = WINDOW_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        window: Window | None = None,
    ) -> None:
        super().__init__("edit-budget", clock)
        self.per_minute = per_minute  # grants allowed per window (a minute, as Slack counts)
        margin = min(WINDOW_MARGIN_SECONDS, window_seconds * 0.025)
        self.window = window or LocalWindow(per_minute, window_seconds + margin, clock)
        self._fixed_burst, self._fixed_headroom = burst, headroom
        # Without finals to reserve for (a native reply's final goes with its stream's stop,
        # not an append), intermediate calls may fill the window, at the pace's rate.
        self.reserve_finals = reserve_finals
        self.headroom = headroom if headroom is not None else self._default_headroom(per_minute)
        # The horizon is a sixth of the window (ten seconds of Slack's minute); shortened
        # windows in tests shorten it alike.
        self.pace = Pace(
            per_minute,
            window_seconds,
            float(burst if burst is not None else self._default_burst(per_minute)),
            clock(),
            horizon=HORIZON_SECONDS * window_seconds / WINDOW_SECONDS,
        )
        # Told when a grant had to wait: the rate is what limits us. Only a full window proves
        # that Slack takes the rate (the pacing alone keeps calls below it).
        # (window_full: the calls made reached the window, not only the pacing).
        self.on_saturated: Callable[[bool], None] | None = None
        # Calls a minute known to pass (a learned rate above it is a probe): only those are
        # spread over the pace's horizon; None: all of `per_minute`.
        self.trusted: Callable[[], int] | None = None
        # Replies opened lately (every replica's, with Redis): is the window scarce?
        self.demand = EditDemand(self.pace.horizon)
        self._stale = STALE_SECONDS * window_seconds / WINDOW_SECONDS
        self._paused_until = 0.0
        self._open: set[int] = set()
        # The open replies of every replica sharing the window (`bot/shared_counts.py`).
        self.open_replies: Count = LocalCount()
        self._open_elsewhere = 0  # the other replicas' open replies, as last read
        # Open replies showing a bare "Thinking…": each is owed an intermediate edit.
        self.placeholders: set[int] = set()
        self._pauses: set[asyncio.Task[None]] = set()
        self.rate_limited_total = 0
        self._last_lane = ""

    def resize(self, per_minute: int) -> None:
        """A learned rate moved: the window, the pace and the reserves follow it."""
        self.per_minute = per_minute
        self.window.resize(per_minute)
        burst = None if self._fixed_burst is not None else self._default_burst(per_minute)
        self.pace.resize(per_minute, None if burst is None else float(burst))
        if self._fixed_headroom is None:
            self.headroom = self._default_headroom(per_minute)
        self._wake.set()

    def _default_burst(self, per_minute: int) -> int:
        """A few calls may go back to back (replies asking at the same moment); more would
        front-load the window again."""
        return max(1, per_minute // 50)

    def _default_headroom(self, per_minute: int) -> int:
        return per_minute // 10 if self.reserve_finals else 0

    def _saturated(self, window_full: bool) -> None:
        if self.on_saturated is not None:
            self.on_saturated(window_full)

    # -- replies ---------------------------------------------------------------------------
    def open(self, editor: Editor) -> None:
        """A reply started: keep a final edit in reserve for it."""
        if id(editor) not in self._open:
            self._open.add(id(editor))
            self.open_replies.add(1)
            self.demand.opened()

    @property
    def open_count(self) -> int:
        """Replies open on this budget (each will want a final call)."""
        return len(self._open)

    async def open_everywhere(self) -> int:
        """Replies open on this budget and on the other replicas' (each owed a final)."""
        self._open_elsewhere = await self.open_replies.others()
        return len(self._open) + self._open_elsewhere

    def close(self, editor: Editor) -> None:
        if id(editor) in self._open:
            self._open.discard(id(editor))
            self.open_replies.add(-1)
        self.placeholders.discard(id(editor))
        self._wake.set()

    def pause(self, seconds: float) -> None:
        """Slack said 429: nobody edits until Retry-After has passed (on every replica, when
        the window is shared)."""
        self.rate_limited_total += 1
        self._paused_until = max(self._paused_until, self._clock() + seconds)
        self._wake.set()
        task = asyncio.get_running_loop().create_task(self._pause(seconds))
        self._pauses.add(task)
        task.add_done_callback(self._pauses.discard)

    async def _pause(self, seconds: float) -> None:
        await self.window.pause(seconds)
        self._wake.set()

    # -- who goes next ---------------------------------------------------------------------
    async def stop(self) -> None:
        """No more edits from this process: every waiting reply is told at once (it hands its
        final text to the live-reply journal for the next process) instead of waiting on."""
        await super().stop()
        await self.demand.stop()

    def _keep_free(self) -> int:
        """Intermediate calls leave one slot per open reply, this replica's and the others'
        (as last read: `open_everywhere`), and some headroom, for finals."""
        if not self.reserve_finals:
            return self.headroom
        return len(self._open) + self._open_elsewhere + self.headroom

    async def spare(self) -> int:
        """Intermediate calls the window could grant now, beyond the finals' reserve."""
        await self.open_everywhere()
        return await self.window.free() - self._keep_free()

    def _refused(self, now: float, wait: float | None) -> None:
        """The window refused: it is full (the rate is what holds edits back), or paused by a
        429 another replica heard (kept here until it ends: the next steps wait without
        asking, and a pause says nothing of the rate)."""
        if self.window.paused_refusal and wait is not None:
            self._paused_until = max(self._paused_until, now + wait)
        else:
            self._saturated(True)

    async def _step(self, now: float) -> float | None:
        """Grant what may go now; return seconds until something may change (None: idle)."""
        self.pace.refill(now)
        self._waiters = [w for w in self._waiters if not w.future.done()]
        if not self._waiters:
            return None
        paused = self._paused_until - now  # the window's own (shared) pause: `take` tells
        if paused > 0:
            return paused
        finals = [w for w in self._waiters if w.editor.wants_final]
        if finals:
            granted, wait = await self.window.take(keep_free=0)
            if granted:
                # The slot is taken: it goes to a final still waiting, else to anyone.
                finals = self._still_waiting(finals) or self._still_waiting(self._waiters)
                if not finals:
                    return 0.0
                lanes = {lane_of(w.editor) for w in finals}
                if len(lanes) > 1:
                    finals = [w for w in finals if lane_of(w.editor) != self._last_lane]
                first = min(finals)
                self._last_lane = lane_of(first.editor)
                self._grant(first)
                return 0.0
            self._refused(now, wait)
            return wait
        # Refreshes also leave a slot for each reply still showing "Thinking…" (its first
        # words); first words need only the finals' reserve.
        await self.open_everywhere()
        keep_free = self._keep_free()
        owed = len(self.placeholders)
        probe = max(0, self.per_minute - self.trusted()) if self.trusted is not None else 0
        allowance = await self.window.free(within=self.pace.horizon) - keep_free - owed - probe
        self.pace.aim(allowance, self._share())
        fresh = [w for w in self._waiters if w.editor.last_edit_at is None]
        # A "Thinking…" was posted only with an edit to spare for it; replies that opened
        # since have taken that spare into their finals' reserve, so its words may use the
        # headroom kept for such replies (or it shows "Thinking…" until its final).
        owing = [w for w in fresh if id(w.editor) in self.placeholders]
        if not fresh and (held := await self._refreshes_held(now)) is not None:
            return held
        if not fresh and not self.pace.ready:
            self._saturated(False)
            return self.pace.wait()
        keep = keep_free - self.headroom if owing else keep_free + (0 if fresh else owed)
        granted, wait = await self.window.take(keep_free=keep)
        if not granted:
            self._refused(now, wait)
            return wait
        fresh, owing = self._still_waiting(fresh), self._still_waiting(owing)
        if fresh:  # first words: not paced
            self._grant(min(owing or fresh))
            return 0.0
        waiting = self._still_waiting(self._waiters)
        if not waiting:
            return 0.0
        oldest = min(waiting, key=lambda w: (w.editor.last_edit_at or 0.0, w.seq))
        self.pace.spend()
        self._grant(oldest)
        return 0.0

    def _share(self) -> float:
        """This replica's share of the shared window's refreshes: its open replies' share of
        the workspace's. Each replica paced the whole allowance: three spent it three times
        as fast (refreshes bunched, appends past Slack's floor: 429s on replicas only)."""
        mine = max(1, len(self._open))
        return mine / (mine + self._open_elsewhere)

    async def _refreshes_held(self, now: float) -> float | None:
        """Seconds until a refresh may go while the window is scarce and no waiting reply's
        text is stale (`bot/slack/edit_demand.py`); None: it may go now."""
        owed = len(self._open) + self._open_elsewhere
        if not self.reserve_finals or not await self.demand.scarce(
            self.per_minute, self.pace.window_seconds, owed
        ):
            return None
        stalest = min((w.editor.last_edit_at or now) for w in self._waiters)
        return None if stalest + self._stale <= now else min(1.0, stalest + self._stale - now)
