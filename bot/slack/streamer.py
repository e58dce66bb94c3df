"""The live reply: visible at once, refreshed as text arrives, a final text that always lands.

Two transports. Native (`chat.startStream` / `appendStream` / `stopStream`, standard Markdown):
the stream starts at once and takes appends. Edits: a placeholder is posted at once and edited.
The model's stream only appends to `source`; a separate pump task turns the latest text into
Slack calls whenever the workspace's budget for that method lets it, so refreshes are paced by
time and budget, never by how many tokens arrived. A native stream that dies (Slack ends
streams after about five minutes) is finished by `chat.update` on the same message: the edit
path then owns it, and `chat.update` replaces the whole text, so nothing is lost or doubled.
A reply longer than one native message continues in ordinary messages. A third way, "in
parts" (bot/slack/parts_reply.py), takes a reply that cannot stream natively when the
`chat.update` budget cannot promise its final edit: ordinary messages, never edited.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.metrics import LIVE_REPLIES
from bot.poster import NOTHING_PRIVATE, PostRefused, poster_of
from bot.slack.edit_budget import EditBudget
from bot.slack.edit_reply import FIRST_WORDS_GRACE, PLACEHOLDER, EditPath
from bot.slack.native_reply import NativeOptions, NativePath
from bot.slack.native_stream import NativeMessage, StreamGone
from bot.slack.parts_choice import edits_cannot_promise
from bot.slack.parts_reply import PartsPath
from bot.slack.reply_failures import Failures, reason
from bot.slack.reply_journal import Journal, ReplyRecord

__all__ = ["PLACEHOLDER", "Journal", "ReplyStream"]

log = logging.getLogger(__name__)


class ReplyStream(NativePath, EditPath, PartsPath):
    def __init__(
        self,
        client: AsyncWebClient,
        budget: EditBudget,
        channel: str,
        thread_ts: str | None,
        *,
        max_chars: int = 3500,
        min_interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        journal: Journal | None = None,
        native: NativeOptions | None = None,
        reader: str | None = None,
    ) -> None:
        self.client = client
        # Where every call of this reply goes (`reader`: the person of a DM), and the audience
        # of what it shows (`carry`): the poster checks one against the other.
        self.outlet = poster_of(client).reply(channel, thread_ts, reader)
        self.carries = NOTHING_PRIVATE
        self.withheld = False  # the poster refused what it carries: it shows WITHHELD
        self.budget = budget
        self.channel = channel
        self.thread_ts = thread_ts
        self.max_chars = max_chars
        self.min_interval = min_interval
        self._clock = clock
        self.source = ""
        self.footer = ""
        self.status = ""  # e.g. "Looking up tasks", shown while not final
        self.shown: list[str] = []  # text of each Slack message as last sent
        self.message_ts: list[str] = []
        self._final = False
        self._last_edit_at: float | None = None
        self._changed = asyncio.Event()
        self._final_requested = asyncio.Event()
        self._grown = asyncio.Event()
        self._pump: asyncio.Task[None] | None = None
        self.journal = ReplyRecord(journal, channel) if journal is not None else None
        self.options = native
        self.native: NativeMessage | None = None
        self.paused = False  # the turn paused: its proposals wait for people
        # Blocks a finished answer ends with (its feedback buttons): in the native stream's
        # stop, or on its first message's final edit.
        self.closing_blocks: list[dict[str, Any]] | None = None
        self.closed_on: str | None = None  # the message they landed on, once they did
        self._closed_with_blocks = False
        # The edit path owns the messages from `_edit_base` on, showing `source[_edit_from:]`
        # (both 0 unless the reply began as a native stream).
        self._edit_base = 0
        self._edit_from = 0
        self._native_end: int | None = None  # where the native message's share of source ends
        self._stop_taken = False
        self._closer: asyncio.Task[None] | None = None
        self._first_text_at: float | None = None
        self.in_parts = False  # posted in parts (`PartsPath`), never edited

    # -- the model's side ------------------------------------------------------------------
    async def start(self) -> str:
        """Start the native stream or post the placeholder; returns the message's ts ("" for
        a reply that fell back from native streaming: its first post waits for words)."""
        if not await self._start_native() and self.options is not None:
            if await edits_cannot_promise(self.budget):
                self._init_parts()  # no final edit to be had soon: ordinary messages
                LIVE_REPLIES.inc()
                self._pump = asyncio.get_running_loop().create_task(self._run_parts())
                return ""
            # No stream start free (auto, or native's patience ran out): edits instead. The
            # first post needs no chat.update, so it does not queue behind the edits of every
            # other reply; it waits a moment for the model's first words instead of posting
            # "Thinking…" that only an edit (scarce at such times) could replace.
            self.budget.open(self)
            LIVE_REPLIES.inc()
            self._pump = asyncio.get_running_loop().create_task(self._run(), name="reply")
            grace = asyncio.get_running_loop().call_later(FIRST_WORDS_GRACE, self._changed.set)
            self._pump.add_done_callback(lambda _: grace.cancel())
            return ""
        if not self.message_ts:
            response = await self.outlet.post(PLACEHOLDER, carries=NOTHING_PRIVATE)
            self.message_ts.append(str(response["ts"]))
            self.shown.append(PLACEHOLDER)
            self.budget.open(self)
        ts = self.message_ts[0]
        LIVE_REPLIES.inc()
        self._pump = asyncio.get_running_loop().create_task(self._run(), name=f"reply-{ts}")
        if self.journal is not None:
            self.journal.opened(ts, self.shown[0])
        return ts

    @property
    def started(self) -> bool:
        return self._pump is not None

    @property
    def answer_ts(self) -> str | None:
        """The message the stored answer is keyed by: the one with the closing blocks."""
        if self.in_parts and self._answer_index is not None:
            return self.message_ts[self._answer_index]
        return self.message_ts[0] if self.message_ts else None

    @property
    def finished(self) -> bool:
        return self._final and (self._pump is None or self._pump.done())

    def append(self, text: str) -> None:
        if text and not self._final:
            if not self.source:  # how old the first words are counts from here, not the pump
                self._first_text_at = self._clock()
            self.source += text
            self._changed.set()
            self._grown.set()

    def set_status(self, status: str) -> None:
        """A short line under the text while the turn works (e.g. runs a read tool)."""
        if status != self.status and not self._final:
            self.status = status
            self._changed.set()

    async def finish(self, footer: str = "") -> list[str]:
        """Make the complete text visible (plus an optional footer) and wait until it is."""
        self.footer = footer
        self._final = True
        self._changed.set()
        self._final_requested.set()
        self._grown.set()
        self.budget.poke()
        if self.options is not None:
            self.options.appends.poke()
        if self._pump is not None:
            await asyncio.shield(self._pump)  # a cancelled caller must not stop the final edit
            if self._pump_died_early:
                await self._settle_journal()
        return self.message_ts

    def _landed(self) -> bool:
        native_done = self.native is None or (
            (self.native.stopped or self._closer is not None)
            and self.native.sent == self.native_text()
        )
        blocks_done = self._closed_with_blocks or not self._wants_closing()
        return native_done and blocks_done and self.shown[self._edit_base :] == self.desired()

    @property
    def _pump_died_early(self) -> bool:
        """The pump stopped (Slack failed for good) before the final text was asked for."""
        if self.in_parts:
            return False  # a reply in parts settles its journal itself
        return self._pump is not None and self._pump.done() and not self._landed()

    # -- the Slack side --------------------------------------------------------------------
    async def _wait_for_interval(self) -> None:
        if self._last_edit_at is None or self._final:
            return
        interval = self.min_interval
        if self.native is not None and self.options is not None:
            interval = self.options.min_interval
        delay = self._last_edit_at + interval - self._clock()
        if delay > 0:
            with contextlib.suppress(TimeoutError):  # a final edit does not wait
                await asyncio.wait_for(self._final_requested.wait(), timeout=delay)

    async def _run(self) -> None:
        failures = Failures()
        try:
            while True:
                await self._changed.wait()
                native = (
                    self.native is not None and not self.native.stopped and self._closer is None
                )
                if not native and await self._hold_placeholder():
                    self._changed.clear()  # until its first words (or its final) come
                    continue
                if native and self.native is not None and self.native.ended:
                    self._to_edits(self.native.ended)  # no call needed to learn it
                    continue
                if native and self._final:
                    self._changed.clear()
                    closing = True  # the stop carries the rest: no append, no append budget
                else:
                    if native and not self._native_has_news(self._final):
                        self._changed.clear()  # only part of a word so far: wait for more
                        continue
                    await self._wait_for_interval()
                    if not await self._permit(native):
                        continue  # the final arrived while an append waited: close instead
                    self._changed.clear()
                    closing = False
                final = self._final
                try:
                    if closing:
                        await self._close_native()
                    elif native:
                        await self._push_native(final)
                    else:
                        await self._reconcile(self.desired(), permit_held=True)
                    failures.succeeded()
                except StreamGone as gone:
                    self._to_edits(str(gone))
                    continue
                except PostRefused:
                    await self._withhold()  # what it shows from now on carries nothing private
                    self._changed.set()
                    continue
                except Exception as exc:
                    self._changed.set()  # what failed is tried again (unless for good)
                    await failures.failed(exc)
                    continue
                if final and not self._changed.is_set() and self._landed():
                    return
                if final:
                    self._changed.set()
        except Exception as exc:  # Slack or the network failed for good: stop, release all
            log.warning("reply in %s stopped updating: %s", self.channel, reason(exc))
        finally:
            self.budget.close(self)
            if self.options is not None:
                self.options.appends.close(self)
                if self.native is not None and not self.native.stopped:
                    self._give_back_stop()
            LIVE_REPLIES.dec()
            if self._final:
                await self._settle_journal()

    async def _permit(self, native: bool) -> bool:
        """Permission for one call: an append for a native reply (given up as soon as the
        final is asked for, which needs none), else an edit (none for a first post, which
        is no chat.update). False: given up."""
        assert self.options is not None or not native
        if not native and not self.message_ts:
            await self._first_words()
            return True
        if not native or self.options is None:
            await self.budget.acquire(self)
            return True
        if self._final:
            return False
        append = asyncio.ensure_future(self.options.appends.acquire(self))
        final = asyncio.ensure_future(self._final_requested.wait())
        try:
            await asyncio.wait({append, final}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            final.cancel()
            if not append.done():
                append.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await append
                self._changed.set()
        if append.cancelled():
            return False
        append.result()  # a closed budget raises here
        return True
