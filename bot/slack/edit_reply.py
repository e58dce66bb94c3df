"""The edit half of a live reply: making Slack's messages show the desired texts with
`chat.update` (and new messages for a continuation), closing a finished reply with its
blocks (the feedback buttons) on its first message, and settling its journal.

Every call goes through the reply's `Outlet` (`bot.poster`), stating the audience the reply
carries (`carry`). Should the poster refuse it (the thread's readers may not read it), the
reply is withheld: from then on its messages show `WITHHELD` and carry nothing private.

`EditPath` is a mixin of `ReplyStream` (bot/slack/streamer.py), which owns the state named
below and the pump that calls `_reconcile`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any, cast

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.audience import narrowest
from bot.errors import slack_error
from bot.metrics import SLACK_EDITS
from bot.poster import NOTHING_PRIVATE, Outlet
from bot.slack.closing_blocks import with_closing
from bot.slack.edit_budget import EditBudget, Editor
from bot.slack.native_reply import CURSOR, WITHHELD
from bot.slack.native_stream import NativeMessage
from bot.slack.render import escape, to_mrkdwn
from bot.slack.reply_journal import ReplyRecord
from bot.slack.split import split_message

log = logging.getLogger(__name__)

PLACEHOLDER = "_Thinking…_"
# A reply that fell back to edits posts its first message once it has this many characters,
# once its first words are this old, or when the grace runs out without any (then with the
# placeholder): its first post shows words, not "Thinking…".
FIRST_WORDS_CHARS = 60
FIRST_WORDS_WAIT = 0.8
FIRST_WORDS_GRACE = 2.0


class EditPath:
    client: AsyncWebClient
    outlet: Outlet
    carries: str
    withheld: bool
    native: NativeMessage | None
    _closer: asyncio.Task[None] | None
    budget: EditBudget
    channel: str
    thread_ts: str | None
    shown: list[str]
    message_ts: list[str]
    journal: ReplyRecord | None
    closing_blocks: list[dict[str, Any]] | None
    closed_on: str | None
    _closed_with_blocks: bool
    _final: bool
    _last_edit_at: float | None
    _clock: Callable[[], float]
    _edit_base: int
    _edit_from: int
    _native_end: int | None
    footer: str
    status: str
    max_chars: int
    source: str
    _first_text_at: float | None
    _final_requested: asyncio.Event
    _grown: asyncio.Event  # set when text arrives or the final is asked for

    async def _first_words(self) -> None:
        """Before a fallen-back reply's first post: wait until it has a few words (or they
        have waited long enough, or the grace is over, or the reply is final). The wait ends
        as soon as the words are there: it used to last `FIRST_WORDS_WAIT` whenever the first
        token alone was short, 0.8 s added to every such reply's first words."""
        if not self.source or self._final:
            return
        arrived = self._first_text_at if self._first_text_at is not None else self._clock()
        while not self._final and len(self.source) < FIRST_WORDS_CHARS:
            left = arrived + FIRST_WORDS_WAIT - self._clock()
            if left <= 0:
                return
            self._grown.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._grown.wait(), timeout=left)

    async def _hold_placeholder(self) -> bool:
        """Whether a fallen-back reply with no words yet (its grace ran out: the bot or the
        model is slow) should keep waiting for them instead of posting "Thinking…". Only an
        intermediate edit could replace it, and when the budget cannot spare one for every
        reply already showing it (many replies at once: every slot is kept for finals) the
        reader would see "Thinking…" until the final. The thread's status says it works."""
        if self.message_ts or self.source or self._final:
            return False
        if await self.budget.spare() <= len(self.budget.placeholders):
            return True
        self.budget.placeholders.add(id(self))  # counted before its post: replies race here
        return False

    def _to_edits(self, reason: str) -> None:
        raise NotImplementedError  # NativePath's

    def native_text(self) -> str:
        raise NotImplementedError  # NativePath's

    def _give_back_stop(self) -> None:
        raise NotImplementedError  # NativePath's

    def carry(self, audience: str) -> None:
        """What the reply shows from now on draws on data of `audience` too."""
        self.carries = narrowest(self.carries, audience)

    async def _withhold(self, live: bool = True) -> None:
        """The poster refused what the reply carries: its messages show `WITHHELD` instead.
        `live`: the pump runs on, and a native stream is stopped (with nothing more) so that
        `chat.update` may replace what it showed."""
        if self.withheld:
            raise RuntimeError("a withheld reply was refused again")
        self.withheld, self.carries = True, NOTHING_PRIVATE
        native = self.native
        if not live or native is None:
            return
        if not native.stopped and self._closer is None:
            with contextlib.suppress(Exception):  # else chat.update finds it still streaming
                await native.stop(None, carries=NOTHING_PRIVATE)
        self._give_back_stop()
        self._to_edits("withheld")

    def desired(self) -> list[str]:
        """The texts of the messages the edit path owns."""
        if self.withheld:
            return split_message(WITHHELD if self._edit_base == 0 else "…", self.max_chars)
        if self._edit_base and self._native_end is None:
            return []
        body = to_mrkdwn(self.source[self._edit_from :])
        if self.footer:
            body = f"{body}\n\n{self.footer}" if body else self.footer
        if not self._final:
            body = (body + CURSOR) if body else PLACEHOLDER
            if self.status:
                body += f"\n_{escape(self.status)}…_"
        return split_message(body or " ", self.max_chars)

    @property
    def _editor(self) -> Editor:
        """This reply as the budget sees it (`ReplyStream` has `wants_final`/`last_edit_at`)."""
        return cast("Editor", self)

    def _wants_closing(self) -> bool:
        """A finished reply the edit path owns from its first message ends with the closing
        blocks (on that first message)."""
        return self._edit_base == 0 and self._final and bool(self.closing_blocks)

    def _closing_for(self, index: int, text: str) -> list[dict[str, Any]] | None:
        if index != 0 or not self._wants_closing():
            return None
        assert self.closing_blocks is not None
        return with_closing(text, self.closing_blocks)

    async def _update(self, index: int, text: str, blocks: list[dict[str, Any]] | None) -> None:
        ts = self.message_ts[index]
        if blocks is not None:
            try:
                await self.outlet.update(ts, text, carries=self.carries, blocks=blocks)
                self._closed_with_blocks = True
                self.closed_on = ts
                return
            except SlackApiError as exc:
                if slack_error(exc) != "invalid_blocks":
                    raise
                log.warning("closing blocks refused in %s: text only", self.channel)
                self.closing_blocks = None
        await self.outlet.update(ts, text, carries=self.carries)

    async def _reconcile(self, desired: list[str], *, permit_held: bool) -> None:
        """Make the messages the edit path owns show `desired`: edit what changed, post what
        is new (a continuation), blank what is no longer needed."""
        base = self._edit_base
        # Whether `desired` shows words, not the source once a call returns: words that come
        # while "Thinking…" is being posted must not count as shown (it would lose the edit
        # owed to it and wait, unrefreshed, for its final).
        words = bool(self.source[self._edit_from :])
        for offset, text in enumerate(desired):
            index = base + offset
            if index < len(self.message_ts):
                blocks = self._closing_for(index, text)
                if self.shown[index] == text and (blocks is None or self._closed_with_blocks):
                    continue
                if not permit_held:
                    await self.budget.acquire(self._editor)
                permit_held = False
                await self._update(index, text, blocks)
                if words:
                    self.budget.placeholders.discard(id(self))
                SLACK_EDITS.labels(kind="reply").inc()
                self._last_edit_at = self._clock()
                if self.journal is not None:
                    self.journal.shown(self.message_ts[index], text)
            else:
                response = await self.outlet.post(text, carries=self.carries)
                self.message_ts.append(str(response["ts"]))
                self.shown.append(text)
                if words:  # else "Thinking…": owed an edit
                    self._last_edit_at = self._clock()  # words shown: its next edit is paced
                    self.budget.placeholders.discard(id(self))
                if self.journal is not None and not self._final:
                    self.journal.opened(self.message_ts[-1], text)  # not waited for
            self.shown[index] = text
        for index in range(base + len(desired), len(self.message_ts)):
            # The text got shorter than before (rare: a re-render moved a cut); blank the rest.
            if self.shown[index] != "…":
                await self.budget.acquire(self._editor)
                await self.outlet.update(self.message_ts[index], "…", carries=NOTHING_PRIVATE)
                self.shown[index] = "…"

    async def _settle_journal(self) -> None:
        """Landed: the reply's journal rows go. Not landed: the journal keeps the final text,
        and whichever process sweeps next puts it in place once this one stops renewing."""
        if self.journal is None or not self.message_ts:
            return
        with contextlib.suppress(Exception):
            if not self.withheld and not await self.outlet.cleared(self.carries):
                await self._withhold(live=False)  # the journal keeps only what may be shown here
            if self.native is not None:
                text = self.native_text()
                # Detached (the closer stops it later): its text is complete already.
                stopping = self.native.stopped or self._closer is not None
                if stopping and self.native.sent == text:
                    await self.journal.closed(self.native.ts)
                else:
                    await self.journal.abandoned(self.native.ts, text)
            desired = self.desired()
            for index, ts in enumerate(self.message_ts[self._edit_base :]):
                text = desired[index] if index < len(desired) else "…"
                if self.shown[self._edit_base + index] == text:
                    await self.journal.closed(ts)
                else:
                    await self.journal.abandoned(ts, text)
