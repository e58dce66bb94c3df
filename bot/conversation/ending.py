"""The last word of a reply that did not finish on its own (an error, a cancellation)."""

from __future__ import annotations

import asyncio
import contextlib

from bot.metrics import TURNS
from bot.slack.streamer import ReplyStream


async def finish_unfinished(
    stream: ReplyStream, placeholder: asyncio.Task[str], note: str, outcome: str
) -> None:
    """Finish a reply that has not finished: the text so far plus `note`. Releases the reply's
    edit-budget slot and its pump task whatever happens; a no-op for a finished reply."""
    with contextlib.suppress(Exception, asyncio.CancelledError):
        await asyncio.wait_for(asyncio.shield(placeholder), 5)
    if not placeholder.done() or placeholder.cancelled() or placeholder.exception():
        return  # no placeholder was posted: nothing in Slack to finish
    if stream.finished:
        return
    TURNS.labels(outcome=outcome).inc()
    with contextlib.suppress(Exception):
        await stream.finish(note)
