"""Whether the `chat.update` window is scarce: whether it will be asked for more finals over
its next minute than it holds. Then an intermediate edit (a refresh of a reply's text) costs a
reply: every slot it takes is one fewer reply sent as edits (one post and its final edit), and
that reply goes in parts instead (two posts, of the 300 a minute every reply shares). So
while the window is scarce a reply sent as edits keeps to its final edit, unless what it shows
has not changed for `STALE_SECONDS` (a long reply is not left frozen for minutes).

Measured (bench/sustained, 200 arrivals a minute): replies sent as edits spent 1.67-1.92
`chat.update` each, all 50 of the minute gone within 30 s, on refreshes made before any reply
went in parts; once replies go in parts, the finals' reserve leaves no room for refreshes, so
holding them only then saves nothing. Scarcity must be seen before: the finals owed (replies
open on the window) plus the replies opening at the present pace for a minute
(`opened lately` over `lately` seconds, scaled) reach what the window holds. A workspace at
rest, or 20 replies at once, is not scarce (their refreshes go on as before); 60 at once is,
until the wave has passed.

The replies opened lately are counted on every replica (`bot/shared_counts.py`): the window is
the workspace's, and so is the pace at which replies come.
"""

from __future__ import annotations

import asyncio
from collections import deque

from bot.shared_counts import Count, LocalCount

STALE_SECONDS = 20.0  # a reply not refreshed this long is refreshed even when scarce


class EditDemand:
    """Replies opened on the window in the last `lately` seconds, on every replica."""

    def __init__(self, lately: float, count: Count | None = None) -> None:
        self.lately = lately
        self.count = count or LocalCount()
        self._forget: deque[asyncio.TimerHandle] = deque()

    def opened(self) -> None:
        """A reply opened on the window now; it counts for `lately` seconds."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no running loop: nothing is paced here
            return
        self.count.add(1)
        self._forget.append(loop.call_later(self.lately, self._forget_one))

    def _forget_one(self) -> None:
        self._forget.popleft()  # every reply counts as long: the oldest goes first
        self.count.add(-1)

    async def scarce(self, per_window: int, window_seconds: float, owed: int) -> bool:
        """Whether `owed` finals (replies open now) and those of the replies opening at the
        present pace over the next `window_seconds` reach the `per_window` slots."""
        lately = self.count.mine + await self.count.others()
        if lately == 0:
            return False
        return owed + lately * window_seconds / self.lately >= per_window

    async def stop(self) -> None:
        for handle in self._forget:
            handle.cancel()
        self._forget.clear()
        await self.count.stop()
