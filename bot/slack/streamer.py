"""The live reply: a placeholder at once, edits as text arrives, a final edit that always lands.

The model's stream only appends to `source`; a separate pump task turns the latest text into
Slack messages whenever the workspace's `EditBudget` lets it, so edits are paced by time and
budget, never by how many tokens arrived. Each pass renders the whole text and reconciles it with
what Slack shows: changed messages are edited, new continuation messages are posted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Protocol

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.errors import retryable, slack_error
from bot.metrics import LIVE_REPLIES, SLACK_EDITS
from bot.slack.edit_budget import EditBudget
from bot.slack.render import escape, to_mrkdwn
from bot.slack.split import split_message

log = logging.getLogger(__name__)

MAX_FAILURES = 4  # transient failures in a row before a reply stops updating
PLACEHOLDER = "_Thinking…_"
CURSOR = " ▍"


class Journal(Protocol):
    """Where a live reply is recorded while it is open, so that a reply cut off by a crash can
    be finished by whichever process starts next (see `bot.conversation.live_replies`)."""

    async def opened(self, channel: str, ts: str) -> None: ...

    def shown(self, ts: str, text: str) -> None: ...

    async def closed(self, ts: str) -> None: ...

    async def abandoned(self, ts: str, text: str) -> None:
        """This process gives up on showing `text` in message `ts`; someone else should."""


class ReplyStream:
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
    ) -> None:
        self.client = client
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
        self._pump: asyncio.Task[None] | None = None
        self.journal = journal

    # -- what the budget reads -------------------------------------------------------------
    @property
    def wants_final(self) -> bool:
        return self._final

    @property
    def last_edit_at(self) -> float | None:
        return self._last_edit_at

    # -- the model's side ------------------------------------------------------------------
    async def start(self) -> str:
        """Post the placeholder; returns its ts."""
        response = await self.client.chat_postMessage(
            channel=self.channel, thread_ts=self.thread_ts, text=PLACEHOLDER
        )
        ts = str(response["ts"])
        self.message_ts.append(ts)
        self.shown.append(PLACEHOLDER)
        self.budget.open(self)
        LIVE_REPLIES.inc()
        self._pump = asyncio.get_running_loop().create_task(self._run(), name=f"reply-{ts}")
        if self.journal is not None:
            try:
                await self.journal.opened(self.channel, ts)
            except Exception:  # the reply still works; only crash recovery lacks this one
                log.warning("could not record live reply %s", ts)
        return ts

    @property
    def started(self) -> bool:
        return self._pump is not None

    @property
    def finished(self) -> bool:
        return self._final and (self._pump is None or self._pump.done())

    def append(self, text: str) -> None:
        if text and not self._final:
            self.source += text
            self._changed.set()

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
        self.budget.poke()
        if self._pump is not None:
            await asyncio.shield(self._pump)  # a cancelled caller must not stop the final edit
            if self._pump_died_early:
                await self._settle_journal()
        return self.message_ts

    @property
    def _pump_died_early(self) -> bool:
        """The pump stopped (Slack failed for good) before the final text was asked for."""
        return self._pump is not None and self._pump.done() and self.shown != self.desired()

    # -- the Slack side --------------------------------------------------------------------
    def desired(self) -> list[str]:
        body = to_mrkdwn(self.source)
        if self.footer:
            body = f"{body}\n\n{self.footer}" if body else self.footer
        if not self._final:
            body = (body + CURSOR) if body else PLACEHOLDER
            if self.status:
                body += f"\n_{escape(self.status)}…_"
        return split_message(body or " ", self.max_chars)

    async def _wait_for_interval(self) -> None:
        if self._last_edit_at is None or self._final:
            return
        delay = self._last_edit_at + self.min_interval - self._clock()
        if delay > 0:
            with contextlib.suppress(TimeoutError):  # a final edit does not wait
                await asyncio.wait_for(self._final_requested.wait(), timeout=delay)

    async def _run(self) -> None:
        failures = 0
        try:
            while True:
                await self._changed.wait()
                await self._wait_for_interval()
                await self.budget.acquire(self)
                self._changed.clear()
                final = self._final
                try:
                    await self._reconcile(self.desired(), permit_held=True)
                    failures = 0
                except Exception as exc:
                    if not retryable(exc):
                        raise
                    if isinstance(exc, SlackApiError) and slack_error(exc) == "ratelimited":
                        self._changed.set()  # still refused after the SDK's retry: again
                        continue
                    failures += 1  # a 5xx or a broken connection: back off, then again
                    if failures > MAX_FAILURES:
                        raise
                    self._changed.set()
                    await asyncio.sleep(min(8.0, 0.5 * 2**failures))
                    continue
                if final and not self._changed.is_set():
                    return
        except Exception as exc:  # Slack or the network failed for good: stop, release all
            reason = slack_error(exc) if isinstance(exc, SlackApiError) else type(exc).__name__
            log.warning("reply in %s stopped updating: %s", self.channel, reason)
        finally:
            self.budget.close(self)
            LIVE_REPLIES.dec()
            if self._final:
                await self._settle_journal()

    async def _settle_journal(self) -> None:
        """Landed: the reply's journal rows go. Not landed: the journal keeps the final text,
        and whichever process sweeps next puts it in place once this one stops renewing."""
        if self.journal is None or not self.message_ts:
            return
        desired = self.desired()
        with contextlib.suppress(Exception):
            for index, ts in enumerate(self.message_ts):
                text = desired[index] if index < len(desired) else "…"
                if self.shown[index] == text:
                    await self.journal.closed(ts)
                else:
                    await self.journal.abandoned(ts, text)

    async def _reconcile(self, desired: list[str], *, permit_held: bool) -> None:
        for index, text in enumerate(desired):
            if index < len(self.message_ts):
                if self.shown[index] == text:
                    continue
                if not permit_held:
                    await self.budget.acquire(self)
                permit_held = False
                await self.client.chat_update(
                    channel=self.channel, ts=self.message_ts[index], text=text
                )
                SLACK_EDITS.labels(kind="reply").inc()
                self._last_edit_at = self._clock()
                if self.journal is not None:
                    self.journal.shown(self.message_ts[index], text)
            else:
                response = await self.client.chat_postMessage(
                    channel=self.channel, thread_ts=self.thread_ts, text=text
                )
                self.message_ts.append(str(response["ts"]))
                if self.journal is not None and not self._final:
                    with contextlib.suppress(Exception):
                        await self.journal.opened(self.channel, self.message_ts[-1])
                        self.journal.shown(self.message_ts[-1], text)
            self.shown[index : index + 1] = [text]
        for index in range(len(desired), len(self.message_ts)):
            # The text got shorter than before (rare: a re-render moved a cut); blank the rest.
            if self.shown[index] != "…":
                await self.budget.acquire(self)
                await self.client.chat_update(
                    channel=self.channel, ts=self.message_ts[index], text="…"
                )
                self.shown[index] = "…"
