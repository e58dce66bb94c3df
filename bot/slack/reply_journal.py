"""What a live reply records while it is open (the protocol; `bot.conversation.live_replies`
implements it), in a module of its own so that the streamer and its native and edit halves
all depend on it and none on another's module for it."""

from __future__ import annotations

from typing import Protocol


class Journal(Protocol):
    """Where a live reply is recorded while it is open, so that a reply cut off by a crash can
    be finished by whichever process starts next (see `bot.conversation.live_replies`)."""

    async def opened(self, channel: str, ts: str) -> None: ...

    def shown(self, ts: str, text: str) -> None: ...

    async def closed(self, ts: str) -> None: ...

    async def abandoned(self, ts: str, text: str) -> None:
        """This process gives up on showing `text` in message `ts`; someone else should."""
