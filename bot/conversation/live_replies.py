"""Replies being written in Slack, recorded so that none is left showing its cursor forever.

While a reply is open its messages have rows in `live_replies`, held by this worker's lease and
renewed in one statement for all of them every few seconds, together with the text each message
last showed. When a reply gets its final text the rows go. A process killed mid-reply leaves
rows whose lease lapses; `recover` (at start-up and on every sweep, on any replica) takes each
over with a compare-and-set and finishes that message: its text so far, without the cursor, and
a note that the reply was interrupted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import timedelta

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy import Table, bindparam, delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot import audience
from bot.db.models import LiveReply, utcnow
from bot.db.session import Database
from bot.errors import slack_error
from bot.metrics import LEASE_TAKEOVERS
from bot.poster import NOTHING_PRIVATE, poster_of
from bot.slack.budgets import WorkspaceBudgets
from bot.slack.native_reply import CURSOR
from bot.slack.streamer import PLACEHOLDER

log = logging.getLogger(__name__)

# The table: an executemany UPDATE by ts (Core; the ORM's bulk update wants primary keys).
LIVE_REPLIES: Table = LiveReply.__table__  # type: ignore[assignment]

TRAIL = 0.25  # seconds the stored text of a live reply may trail what Slack shows

# How long a sweep waits for the workspace's budget to finish one message; past it the rest
# are left for the next sweep (a start-up must not wait a minute for the window to free).
RECOVERY_PATIENCE_SECONDS = 2.0


class _Finishing:
    """A cut-off message's last edit waits like a reply's first words: it needs room in the
    `chat.update` window beyond the finals kept for the replies open now."""

    wants_final = False
    last_edit_at: float | None = None
    lane = "recovery"


CUT_OFF = (
    ":warning: _Interrupted: Countersign stopped before this reply finished. Please ask again._"
)


def finished_text(shown: str) -> str:
    """What a message cut off mid-reply should end up showing."""
    body = shown.rsplit(CURSOR, 1)[0] if CURSOR in shown else shown
    if body.strip() in ("", PLACEHOLDER):
        return CUT_OFF
    return f"{body}\n\n{CUT_OFF}" if CURSOR in shown else body


class LiveReplies:
    def __init__(self, db: Database, worker: str, lease_seconds: float = 30.0) -> None:
        self.db = db
        self.worker = worker
        self.lease = timedelta(seconds=lease_seconds)
        self._pending: dict[str, str] = {}
        self._open: set[str] = set()
        self._flusher: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()

    async def opened(self, channel: str, ts: str) -> None:
        """Record a new message (with other replies' openings: `Database.group`)."""

        async def insert(session: AsyncSession) -> None:
            session.add(
                LiveReply(
                    channel_id=channel,
                    ts=ts,
                    shown="",
                    owner=self.worker,
                    lease_expires_at=utcnow() + self.lease,
                )
            )  # inserted at the commit, with the batch's other openings

        await self.db.group.run(insert)
        self._open.add(ts)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._renew(), name="live")

    def shown(self, ts: str, text: str) -> None:
        if ts in self._open:
            self._pending[ts] = text
            self._changed.set()

    async def closed(self, ts: str) -> None:
        """Forget a message shown in full (with other replies' closings: `Database.group`;
        when 40 turns pause at a budget at once, 40 transactions queued here)."""
        self._open.discard(ts)
        self._pending.pop(ts, None)

        async def forget(session: AsyncSession) -> None:
            await session.execute(
                delete(LiveReply).where(LiveReply.ts == ts, LiveReply.owner == self.worker)
            )

        await self.db.group.run(forget)

    async def abandoned(self, ts: str, text: str) -> None:
        """This process could not show `text` (Slack kept failing): store it and stop renewing
        the lease, so the next sweep after it lapses (here or on another replica) shows it."""
        self._open.discard(ts)
        self._pending.pop(ts, None)

        async def give_up(session: AsyncSession) -> None:
            await session.execute(
                update(LiveReply)
                .where(LiveReply.ts == ts, LiveReply.owner == self.worker)
                .values(shown=text, owner=f"{self.worker}/abandoned")
            )

        await self.db.group.run(give_up)

    async def flush(self) -> None:
        """Store the texts shown since the last flush and renew this worker's leases."""
        pending, self._pending = self._pending, {}
        async with self.db.transaction() as session:
            if pending:  # one statement for all of them (at 60 replies: 60 every 0.25 s)
                table = LIVE_REPLIES
                await session.execute(
                    update(table)
                    .where(table.c.ts == bindparam("message"), table.c.owner == self.worker)
                    .values(shown=bindparam("text")),
                    [{"message": ts, "text": text} for ts, text in pending.items()],
                )
            await session.execute(
                update(LiveReply)
                .where(LiveReply.owner == self.worker, LiveReply.ts.in_(self._open))
                .values(lease_expires_at=utcnow() + self.lease)
            )

    async def _renew(self) -> None:
        """Renew every third of the lease; store shown texts within `TRAIL` seconds of a
        change (so a crash loses at most that much of what the reader saw)."""
        while self._open:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), self.lease.total_seconds() / 3)
                await asyncio.sleep(TRAIL)
            self._changed.clear()
            try:
                await self.flush()
            except Exception:  # the database is back soon; the lease is three periods long
                log.warning("could not renew live replies")

    async def stop(self) -> None:
        if self._flusher is not None:
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher

    @staticmethod
    async def _finish(
        slack: AsyncWebClient,
        channel: str,
        ts: str,
        text: str,
        budgets: WorkspaceBudgets | None = None,
    ) -> None:
        """Show `text` in the message. A native stream cut off stays open until Slack ends it
        (minutes later) and takes no `chat.update` until then: stop it first, then edit.
        `text` is what the message showed, or what its reply had been cleared to show there
        (`EditPath._settle_journal`): data of the message's own place. Each call takes its
        slot in the workspace's budget first (`TimeoutError`: none came in time)."""
        outlet = poster_of(slack).reply(channel, None)
        carries = audience.channel(channel)

        async def edit_slot() -> None:
            if budgets is not None:
                await asyncio.wait_for(
                    budgets.edits.acquire(_Finishing()), RECOVERY_PATIENCE_SECONDS
                )

        async def stop_slot() -> None:
            if budgets is not None:
                budgets.streams.hold()  # its stop_permit releases it again
                await asyncio.wait_for(budgets.streams.stop_permit(), RECOVERY_PATIENCE_SECONDS)

        await edit_slot()
        try:
            await outlet.update(ts, text, carries=carries)
        except SlackApiError as exc:
            if slack_error(exc) != "streaming_state_conflict":
                raise
            await stop_slot()
            await outlet.stop_stream(ts, carries=NOTHING_PRIVATE)
            await edit_slot()
            await outlet.update(ts, text, carries=carries)

    async def recover(self, slack: AsyncWebClient, budgets: WorkspaceBudgets | None = None) -> int:
        """Finish every message whose writer's lease lapsed, each call within `budgets` (the
        workspace's); returns how many were finished. When the budget has no room for long,
        the rest are left for the next sweep."""
        now = utcnow()
        async with self.db.transaction() as session:
            lapsed = (
                await session.scalars(select(LiveReply).where(LiveReply.lease_expires_at <= now))
            ).all()
        done = 0
        for row in lapsed:
            if row.ts in self._open:
                continue  # ours and alive (a renewal is just late)
            async with self.db.transaction() as session:
                claimed = await session.execute(
                    update(LiveReply)
                    .where(LiveReply.id == row.id, LiveReply.lease_expires_at <= now)
                    .values(owner=self.worker, lease_expires_at=utcnow() + self.lease)
                )
            if getattr(claimed, "rowcount", 0) != 1:
                continue  # another replica took it
            LEASE_TAKEOVERS.labels(kind="reply").inc()
            try:
                await self._finish(slack, row.channel_id, row.ts, finished_text(row.shown), budgets)
            except TimeoutError:  # no room in the budget: retaken once our lease lapses
                log.info("finishing interrupted replies: the Slack budget is spent, more later")
                break
            except Exception as exc:  # left for the next sweep once our lease lapses
                log.warning("could not finish interrupted reply %s: %s", row.ts, type(exc).__name__)
                continue
            async with self.db.transaction() as session:
                await session.execute(delete(LiveReply).where(LiveReply.id == row.id))
            done += 1
        return done
