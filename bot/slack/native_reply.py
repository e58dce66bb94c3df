"""The native half of a live reply: starting the stream, appending to it, stopping it, and
handing its message to the edit path when Slack ends the stream.

`NativePath` is a mixin of `ReplyStream` (bot/slack/streamer.py), which owns the state named
below and the pump that calls these methods.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.errors import slack_error
from bot.poster import Outlet
from bot.slack.edit_budget import EditBudget
from bot.slack.native_stream import NATIVE_MAX_CHARS, NativeMessage, native_cut, source_index
from bot.slack.parts_choice import OwedFinals
from bot.slack.render import escape
from bot.slack.reply_journal import ReplyRecord
from bot.slack.stream_slots import StreamSlots

log = logging.getLogger(__name__)

CURSOR = " ▍"  # ends an unfinished text (edits show it; the journal stores it)
# How long a final waits for its stream's stop (reserved when the stream started, so normally
# at once) before the rest of the reply goes on in an ordinary message instead: the reader
# sees the last words within about this long of the model's last token whatever Slack's
# windows are doing.
STOP_GRACE_SECONDS = 1.0
# What a reply shows once the poster refused what it carries (`EditPath._withhold`).
WITHHELD = (
    ":lock: _This reply was withheld: it draws on what not everyone here may read. Please ask "
    "me in a DM._"
)


@dataclass(frozen=True)
class NativeOptions:
    """How this reply may stream natively: the budgets, who it is for, and whether to wait
    for a start (`STREAMING=native`) or use edits when none is free (`auto`)."""

    appends: EditBudget
    slots: StreamSlots
    recipient_user: str
    recipient_team: str
    patience: float = 0.0  # seconds to wait for a start; 0: edits if none is free now
    min_interval: float = 0.5
    max_chars: int = NATIVE_MAX_CHARS
    # The workspace's replies in parts owing a final (`WorkspaceBudgets.owed_finals`; a reply
    # given none counts only itself).
    owed_finals: OwedFinals = field(default_factory=OwedFinals)


class NativePath:
    client: AsyncWebClient
    outlet: Outlet
    carries: str
    withheld: bool
    budget: EditBudget
    channel: str
    thread_ts: str | None
    source: str
    footer: str
    shown: list[str]
    message_ts: list[str]
    journal: ReplyRecord | None
    options: NativeOptions | None
    native: NativeMessage | None
    closing_blocks: list[dict[str, Any]] | None
    closed_on: str | None
    _final: bool
    _changed: asyncio.Event
    status: str

    def set_status(self, status: str) -> None: ...  # ReplyStream's (the status line)

    _last_edit_at: float | None
    _clock: Callable[[], float]
    # The edit path owns the messages from `_edit_base` on, showing `source[_edit_from:]`
    # (both 0 unless the reply began as a native stream).
    _edit_base: int
    _edit_from: int
    _native_end: int | None  # where the native message's share of `source` ends, once full
    _stop_taken: bool  # this reply's reserved stop is spent (taken, or given back)
    _closer: asyncio.Task[None] | None  # stops a detached stream once a stop frees

    def task(self, task_id: str, title: str, state: str, details: str | None = None) -> None:
        """A step of the turn (a read tool): a task in a native stream, the status line in
        edits. `state` is pending, in_progress, complete or error."""
        if self._final:
            return
        if self.native is not None and not self.native.stopped:
            self.native.task(task_id, title, state, details)
            self._changed.set()
        else:
            self.set_status(title if state in ("pending", "in_progress") else "")

    def stream_ended(self, stopped: tuple[str, ...]) -> None:
        """Slack stopped these streaming messages (its Stop button): if this reply's is among
        them, the rest goes by `chat.update` without first trying an append."""
        if self.native is not None and self.native.ts in stopped and not self.native.stopped:
            self.native.ended = "stopped_by_user"
            self._changed.set()

    # -- what the budget reads -------------------------------------------------------------
    @property
    def wants_final(self) -> bool:
        return self._final

    @property
    def last_edit_at(self) -> float | None:
        return self._last_edit_at

    async def _start_native(self) -> bool:
        options = self.options
        if options is None or not self.thread_ts:
            return False
        if options.patience <= 0 and not await self._native_pays(options):
            return False  # auto: edits refresh this reply as often as appends would, or more
        # Counted at once, before any await: replies starting together each see the others.
        options.appends.open(self)
        admitted = (
            await options.slots.open(options.patience)
            if options.patience > 0
            else await options.slots.try_open()
        )
        if not admitted:
            options.appends.close(self)
            return False
        try:
            self.native = await NativeMessage.start(
                self.outlet, options.recipient_user, options.recipient_team
            )
        except Exception as exc:  # e.g. the workspace does not offer streaming: use edits
            options.slots.release()
            options.appends.close(self)
            reason = slack_error(exc) if isinstance(exc, SlackApiError) else type(exc).__name__
            log.warning("native stream refused in %s (%s): using edits", self.channel, reason)
            return False
        self.message_ts.append(self.native.ts)
        self.shown.append("")
        self._edit_base = 1
        return True

    def native_text(self) -> str:
        """The markdown the native message should show (its share of the reply, plus the
        footer once final if the reply did not continue in other messages)."""
        if self.withheld:
            return WITHHELD
        end = self._native_end if self._native_end is not None else len(self.source)
        text = escape(self.source[:end])
        if self._final and self.footer and end == len(self.source):
            text = f"{text}\n\n{self.footer}" if text else self.footer
        return text

    def _native_has_news(self, final: bool) -> bool:
        """Whether an append now would carry anything (an append grant is a real call)."""
        native = self.native
        if native is None or native.stopped:
            return False
        if final or native.has_news:
            return True
        return bool(native.next_piece(self.native_text(), False))

    async def _native_pays(self, options: NativeOptions) -> bool:
        """`STREAMING=auto`: whether this reply would be refreshed at least as often as a
        native stream (its share of the append rate) as it would be by edits (its share of
        the chat.update rate), and an append is free now for its first words. The two budgets
        are separate, so using both carries more replies at a time than either alone (at
        Slack's floors, 100 appends and 50 edits a minute: two streams for each reply sent as
        edits); a reply sent as edits shows its first words with its first post."""
        appends, edits = options.appends, self.budget
        fair = appends.per_minute / (appends.open_count + 1) >= edits.per_minute / (
            edits.open_count + 1
        )
        return fair and await appends.window.free() > 0

    def _fill_native(self, options: NativeOptions) -> bool:
        """Whether the native message is full: its share of the reply ends where one message
        can hold no more, and the rest continues in ordinary messages."""
        if self._native_end is None:
            cut = native_cut(self.source, options.max_chars)
            if cut < len(self.source):
                self._native_end = cut
                self._edit_from = cut
        return self._native_end is not None

    def _give_back_stop(self) -> None:
        """This reply will not use its reserved stop (once, however it ends)."""
        if self.options is not None and not self._stop_taken:
            self._stop_taken = True
            self.options.slots.release()

    async def _close_native(self) -> None:
        """The final of a native reply: one `chat.stopStream` that carries the text not sent
        yet, with no append before it, so the last words never queue behind appends. If the
        stop is not to be had within `STOP_GRACE_SECONDS`, the stream keeps what it showed and
        the rest goes on in an ordinary message at once (`_detach_native`)."""
        native, options = self.native, self.options
        assert native is not None
        assert options is not None
        full = self._fill_native(options)
        target = self.native_text()
        rest = native.next_piece(target, True)
        try:
            if rest.strip() or native.has_news:
                async with asyncio.timeout(STOP_GRACE_SECONDS):
                    await options.slots.stop_permit()
            else:  # the reader has every word already: the stop may take its time
                await options.slots.stop_permit()
        except TimeoutError:
            self._stop_taken = True  # stop_permit gave the slot back when it was cancelled
            self._detach_native("no stream stop free in time")
            return
        self._stop_taken = True
        closing = self.closing_blocks if not full else None
        await native.stop(closing, target, carries=self.carries)
        if closing:
            self.closed_on = native.ts
        self._last_edit_at = self._clock()
        if self.journal is not None:
            self.journal.shown(native.ts, native.sent)
        options.appends.close(self)
        if full:
            self.budget.open(self)
            self._changed.set()

    def _detach_native(self, reason: str) -> None:
        """The stream keeps what it showed; the rest of the reply continues in ordinary
        messages through the edit path now, and the stream is stopped once a stop frees."""
        native, options = self.native, self.options
        assert native is not None
        assert options is not None
        log.info("reply in %s: %s, the rest goes on in a new message", self.channel, reason)
        end = source_index(self.source, native.sent)
        self._native_end = end
        self._edit_from = end
        options.appends.close(self)
        options.slots.hold()  # the closer's stop_permit releases it again
        self._closer = asyncio.get_running_loop().create_task(
            self._stop_detached(native, options), name=f"stop-{native.ts}"
        )
        self.budget.open(self)
        self._changed.set()

    async def _stop_detached(self, native: NativeMessage, options: NativeOptions) -> None:
        try:
            await options.slots.stop_permit()
            await native.stop(None, carries=self.carries)
        except Exception as exc:  # the stream ends by itself after a few minutes anyway
            log.info("could not stop a detached stream in %s: %s", self.channel, exc)

    def _to_edits(self, reason: str) -> None:
        """The native stream is over (`reason`); the edit path owns its message from now on.
        `chat.update` replaces the whole text, so what the stream showed is neither lost nor
        shown twice."""
        assert self.options is not None
        assert self.native is not None
        log.info("stream in %s ended (%s): finishing by chat.update", self.channel, reason)
        if not self.native.stopped:
            self._give_back_stop()
        self.options.appends.close(self)
        self.native = None
        self._edit_base = 0
        self._edit_from = 0
        self.shown[0] = "\0"  # unknown: the next pass edits it
        self.budget.open(self)
        self._changed.set()

    async def _push_native(self, final: bool) -> None:
        """One append (the next piece and any task updates); once everything is sent and the
        reply is final, or the message is full, the stop."""
        native, options = self.native, self.options
        assert native is not None
        assert options is not None
        full = self._fill_native(options)
        target = self.native_text()
        if await native.append(target, final or full, self.carries):
            self._last_edit_at = self._clock()
            if self.journal is not None:
                self.journal.shown(native.ts, native.sent + ("" if final else CURSOR))
        if (final or full) and native.sent == target and not native.stopped:
            await options.slots.stop_permit()
            self._stop_taken = True
            closing = self.closing_blocks if final and not full else None
            await native.stop(closing, carries=self.carries)
            if closing:
                self.closed_on = native.ts
            options.appends.close(self)
            if full:
                self.budget.open(self)
                self._changed.set()
