"""The last word of a reply that did not finish on its own (an error, a cancellation)."""

from __future__ import annotations

import asyncio
import contextlib

from bot.conversation.notes import stopped_note
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


async def end_stopped(
    stopped_by: str | None, stream: ReplyStream, placeholder: asyncio.Task[str]
) -> bool:
    """If a Stop is what cancelled the current turn: end its reply with who stopped it, absorb
    the cancellation and return True. False for any other cancellation (a shutdown)."""
    task = asyncio.current_task()
    if stopped_by is None or task is None or task.uncancel() > 0:
        return False
    await finish_unfinished(stream, placeholder, stopped_note(stopped_by), "stopped")
    return True
