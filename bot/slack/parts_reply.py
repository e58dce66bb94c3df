"""The third way to show a live reply: "in parts", ordinary messages that are never edited.

A reply that cannot stream natively falls back to edits, and each reply sent as edits ends
with at least one `chat.update` (its final text), of which Slack allows about 50 a minute
for the whole workspace. Under sustained load more replies end per minute than that: finals
queue for minutes. `chat.postMessage` has the capacity (about one a second per channel,
several hundred a minute per workspace), so such a reply is posted in parts instead:

* its first part once it has words at a clean boundary (the end of a sentence or line after
  `FIRST_PART_CHARS`, or a word boundary once its first words are `FIRST_PART_WAIT` old),
  without a cursor or placeholder;
* an intermediate part only for a long reply: at a paragraph break once `PART_INTERVAL` has
  passed since the last part and `PART_MIN_CHARS` wait, or when a message's worth waits;
* its final part (the rest, the footer and the closing blocks) as soon as the reply ends,
  split with `split_message` if it is longer than one message.

A part never ends mid-word, inside a code block or an inline span, and always leaves at least
one word for the final part (which carries the feedback buttons), so the parts read in order
are the final text exactly. No status line is shown (it could never be edited away): the
thread's status says the agent works.

The journal holds one row, the last part posted, showing its text with the cursor: a crash
before the final part leaves that message to be finished by recovery with the "interrupted"
note (the words already posted stay, none is posted twice). A final part that cannot be posted
is handed to the journal with the rest of the text when it fits in that message.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from slack_sdk.errors import SlackApiError

from bot.errors import slack_error
from bot.metrics import LIVE_REPLIES
from bot.poster import NOTHING_PRIVATE, Outlet, PostRefused
from bot.slack.call_budgets import asking
from bot.slack.closing_blocks import with_closing
from bot.slack.native_reply import CURSOR, WITHHELD, NativeOptions
from bot.slack.part_cuts import part_cut
from bot.slack.render import to_mrkdwn
from bot.slack.reply_failures import Failures, reason
from bot.slack.reply_journal import ReplyRecord
from bot.slack.split import split_message
from bot.slack.web_client import CallSkipped

log = logging.getLogger(__name__)

FIRST_PART_WAIT = 1.5  # s: first words this old are posted at their last word boundary
PART_INTERVAL = 10.0  # s: at most one intermediate part this often
# A part skipped (its budget keeps the finals' slots) is tried again this soon.
PART_RETRY_SECONDS = 0.25


class PartsPath:
    """A mixin of `ReplyStream` (bot/slack/streamer.py): the pump of a reply in parts."""

    outlet: Outlet
    carries: str
    withheld: bool
    channel: str
    source: str
    footer: str
    shown: list[str]
    message_ts: list[str]
    journal: ReplyRecord | None
    closing_blocks: list[dict[str, Any]] | None
    closed_on: str | None
    max_chars: int
    _final: bool
    _changed: asyncio.Event
    _final_requested: asyncio.Event
    _clock: Callable[[], float]
    _first_text_at: float | None
    in_parts: bool
    _posted_to: int  # how much of `source` the parts posted so far show
    _part_at: float | None  # when the last part was posted
    _parts_done: bool  # the final part is posted (or the reply was withheld)
    _closings: list[asyncio.Task[None]]  # journal rows of parts followed by a later part
    _answer_index: int | None  # the part that carries the closing blocks
    _journaled: str | None  # the part whose journal row is open (the newest non-final one)
    _final_chunks: list[str] | None  # the final part, cut into messages once
    _final_sent: int  # how many of those are posted
    _owes_final: bool  # counted in `options.owed_finals`
    options: NativeOptions | None  # a reply goes in parts only when it could stream natively

    def _init_parts(self) -> None:
        assert self.options is not None
        self.options.owed_finals.owe()
        self._owes_final = True
        self.in_parts = True
        self._posted_to = 0
        self._part_at = None
        self._parts_done = False
        self._closings = []
        self._answer_index = None
        self._journaled = None
        self._final_chunks = None
        self._final_sent = 0

    async def _withhold(self, live: bool = True) -> None:
        raise NotImplementedError  # EditPath's

    def _part_wait(self) -> float | None:
        """Seconds until the unposted text may become a part by age alone (None: only news)."""
        if self._first_text_at is None:
            return None
        if not self.message_ts:
            return max(0.0, self._first_text_at + FIRST_PART_WAIT - self._clock())
        assert self._part_at is not None
        return max(0.0, self._part_at + PART_INTERVAL - self._clock())

    def _next_cut(self) -> int | None:
        if self._first_text_at is None:
            return None
        wait = self._part_wait()
        cut = part_cut(
            self.source[self._posted_to :],
            first=not self.message_ts,
            ripe=wait is not None and wait <= 0,
            limit=self.max_chars,
        )
        return None if cut is None else self._posted_to + cut

    async def _run_parts(self) -> None:
        failures = Failures(rate_limited_wait=1.0)
        try:
            while not self._parts_done:
                try:
                    if self._final:
                        await self._post_final()
                        break
                    cut = self._next_cut()
                    if cut is None:  # wait for more words (or for them to age)
                        self._changed.clear()
                        wait = self._part_wait()
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(self._changed.wait(), wait or None)
                        continue
                    await self._post_part(cut)
                    failures.succeeded()
                except CallSkipped:  # no room for a part now: the finals first
                    # Tried again in a moment, or at once for the final; not at every token:
                    # words do not make room, and each try asks the shared windows (Redis).
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._final_requested.wait(), PART_RETRY_SECONDS)
                except PostRefused:
                    await self._post_withheld()
                except Exception as exc:
                    await failures.failed(exc)
        except Exception as exc:  # Slack or the network failed for good
            log.warning("reply in %s stopped posting parts: %s", self.channel, reason(exc))
            await self._final_requested.wait()  # the journal keeps the final text, once known
        finally:
            self._paid_final()
            LIVE_REPLIES.dec()
            if self._final:
                await self._settle_parts()

    async def _post(self, text: str, blocks: list[dict[str, Any]] | None, carries: str) -> str:
        if blocks is not None:
            try:
                response = await self.outlet.post(text, carries=carries, blocks=blocks)
                self._answer_index = len(self.message_ts)
                self.closed_on = str(response["ts"])
                return self.closed_on
            except SlackApiError as exc:
                if slack_error(exc) != "invalid_blocks":
                    raise
                log.warning("closing blocks refused in %s: text only", self.channel)
                self.closing_blocks = None
        response = await self.outlet.post(text, carries=carries)
        return str(response["ts"])

    async def _post_part(self, cut: int) -> None:
        """One part that is not the last: the text up to `cut`, posted and journaled."""
        body = to_mrkdwn(self.source[self._posted_to : cut].strip())
        for i, chunk in enumerate(split_message(body, self.max_chars)):
            if i == 0:  # skipped when the finals need the room (nothing posted yet)
                assert self.options is not None
                held = await self.options.owed_finals.held()
                with asking(skip=True, keep_free=held):
                    ts = await self._post(chunk, None, self.carries)
            else:
                ts = await self._post(chunk, None, self.carries)
            self.message_ts.append(ts)
            self.shown.append(chunk)
            self._journal_part(ts, chunk)
        self._posted_to = cut
        self._part_at = self._clock()

    def _journal_part(self, ts: str, text: str) -> None:
        """The newest part is the reply's open message; the one before it is complete."""
        if self.journal is None:
            return
        if self._journaled is not None:
            done = self.journal.closed(self._journaled)
            self._closings.append(asyncio.get_running_loop().create_task(done))
        self.journal.opened(ts, text + CURSOR)
        self._journaled = ts

    def _final_text(self) -> str:
        body = to_mrkdwn(self.source[self._posted_to :].strip())
        if self.footer:
            body = f"{body}\n\n{self.footer}" if body else self.footer
        return body

    async def _post_final(self) -> None:
        """The rest of the reply, its footer and its closing blocks (on its last message), at
        once. Cut into chunks once, so that a retry after a failure goes on where it was."""
        if self._final_chunks is None:
            self._final_chunks = split_message(self._final_text() or " ", self.max_chars)
        chunks = self._final_chunks
        while self._final_sent < len(chunks):
            chunk = chunks[self._final_sent]
            blocks = None
            if self._final_sent == len(chunks) - 1 and self.closing_blocks:
                blocks = with_closing(chunk, self.closing_blocks)
            ts = await self._post(chunk, blocks, self.carries)
            self.message_ts.append(ts)
            self.shown.append(chunk)
            self._final_sent += 1
        self._parts_done = True
        self._paid_final()

    def _paid_final(self) -> None:
        if self._owes_final and self.options is not None:
            self._owes_final = False
            self.options.owed_finals.paid()

    async def _post_withheld(self) -> None:
        """The poster refused what the reply now carries: what was posted stays (it was
        cleared when it went), and the reply ends with the withheld note, carrying nothing
        private (as the edit path shows it)."""
        if self.withheld:
            raise RuntimeError("a withheld reply was refused again")
        await self._withhold(live=False)
        ts = await self._post(WITHHELD, None, NOTHING_PRIVATE)
        self.message_ts.append(ts)
        self.shown.append(WITHHELD)
        self._posted_to = len(self.source)
        self._parts_done = True

    async def _settle_parts(self) -> None:
        """Landed: the journal's rows go. Not landed: the last part posted keeps in the
        journal what it should show (the rest of the reply when it fits, else the cursor that
        recovery turns into the "interrupted" note)."""
        if self.journal is None:
            return
        with contextlib.suppress(Exception):
            await asyncio.gather(*self._closings, return_exceptions=True)
            ts = self._journaled
            if ts is None:
                return
            if self._parts_done:
                await self.journal.closed(ts)
                return
            index = self.message_ts.index(ts)
            rest = self._final_text()
            whole = f"{self.shown[index]}\n\n{rest}" if rest else self.shown[index]
            cleared = not self.withheld and await self.outlet.cleared(self.carries)
            fits = len(whole) <= self.max_chars and cleared  # only what may be shown there
            await self.journal.abandoned(ts, whole if fits else self.shown[index] + CURSOR)
