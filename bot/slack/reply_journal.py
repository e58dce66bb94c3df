"""What a live reply records while it is open (the protocol; `bot.conversation.live_replies`
implements it), in a module of its own so that the streamer and its native and edit halves
all depend on it and none on another's module for it.

`ReplyRecord` is one reply's side of it: a new message is recorded in the background, so that
the reply's pump never waits for the database (at 60 replies at once, with every turn writing
to it, one insert waited 5-10 s, and the reply could not refresh, or replace its "Thinking…",
meanwhile). The window in which a crash leaves a message unrecorded is the same as before
(between the post and the insert); only the pump no longer sits in it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

log = logging.getLogger(__name__)


class Journal(Protocol):
    """Where a live reply is recorded while it is open, so that a reply cut off by a crash can
    be finished by whichever process starts next (see `bot.conversation.live_replies`)."""

    async def opened(self, channel: str, ts: str) -> None: ...

    def shown(self, ts: str, text: str) -> None: ...

    async def closed(self, ts: str) -> None: ...

    async def abandoned(self, ts: str, text: str) -> None:
        """This process gives up on showing `text` in message `ts`; someone else should."""


class ReplyRecord:
    """One live reply's messages in the journal. `opened` returns at once; what a message
    showed before its row existed is stored once it does; closing or abandoning a message
    waits for its row first (a row inserted after its delete would be "recovered" later)."""

    def __init__(self, journal: Journal, channel: str) -> None:
        self.journal = journal
        self.channel = channel
        self._texts: dict[str, str] = {}
        self._openings: dict[str, asyncio.Task[None]] = {}

    def opened(self, ts: str, text: str) -> None:
        self._texts[ts] = text
        self._openings[ts] = asyncio.get_running_loop().create_task(
            self._open(ts), name=f"journal-{ts}"
        )

    async def _open(self, ts: str) -> None:
        try:
            await self.journal.opened(self.channel, ts)
        except Exception:  # the reply still works; only crash recovery lacks this one
            log.warning("could not record live reply %s", ts)
            return
        self.journal.shown(ts, self._texts[ts])  # what it showed meanwhile

    def shown(self, ts: str, text: str) -> None:
        self._texts[ts] = text
        self.journal.shown(ts, text)

    async def _opening_done(self, ts: str) -> None:
        opening = self._openings.pop(ts, None)
        if opening is not None:
            await asyncio.gather(opening, return_exceptions=True)

    async def closed(self, ts: str) -> None:
        await self._opening_done(ts)
        await self.journal.closed(ts)

    async def abandoned(self, ts: str, text: str) -> None:
        await self._opening_done(ts)
        await self.journal.abandoned(ts, text)
