"""Checkpoints of the audit chain: each workspace's head hash and row count at one moment,
signed with `AUDIT_SIGNING_KEY` (HMAC-SHA256) and posted outside the database (to
`AUDIT_CHECKPOINT_CHANNEL`, through a callable the composition root gives), so rows cut off the
end of the chain are noticed by `countersign audit verify`.
"""

from __future__ import annotations

import hmac
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from hashlib import sha256

from sqlalchemy import select

from bot.db.audit_chain import canonical, iso
from bot.db.models import AuditChainHead, AuditCheckpoint, utcnow
from bot.db.session import Database

log = logging.getLogger(__name__)

# The message metadata's event type of a posted checkpoint.
EVENT_TYPE = "countersign_audit_checkpoint"


@dataclass(frozen=True)
class Checkpoint:
    team_id: str
    rows: int
    head_hash: str
    at: datetime
    signature: str | None
    source: str  # where it was read: "database #3", "Slack C0AUDIT 1764…"

    def payload(self) -> dict[str, str | int]:
        """What is posted (message metadata) and read back."""
        return {
            "team": self.team_id,
            "rows": self.rows,
            "head": self.head_hash,
            "at": iso(self.at),
            "signature": self.signature or "",
        }


Post = Callable[[Checkpoint], Awaitable[None]]


def signature(key: str, team_id: str, rows: int, head_hash: str, at: datetime) -> str:
    message = canonical({"team": team_id, "rows": rows, "head": head_hash, "at": iso(at)})
    return hmac.new(key.encode(), message, sha256).hexdigest()


def signed_correctly(key: str, checkpoint: Checkpoint) -> bool:
    expected = signature(
        key, checkpoint.team_id, checkpoint.rows, checkpoint.head_hash, checkpoint.at
    )
    return hmac.compare_digest(expected, checkpoint.signature or "")


def _of(row: AuditCheckpoint) -> Checkpoint:
    return Checkpoint(
        row.team_id, row.rows, row.head_hash, row.created_at, row.signature, f"database #{row.id}"
    )


async def stored_checkpoints(db: Database) -> list[Checkpoint]:
    async with db.transaction() as session:
        rows = await session.scalars(select(AuditCheckpoint).order_by(AuditCheckpoint.id))
        return [_of(row) for row in rows.all()]


async def write_checkpoints(
    db: Database, key: str | None, only_if_changed: bool = False
) -> list[Checkpoint]:
    """One checkpoint per workspace with a chain (only where it grew since the last one, with
    `only_if_changed`); returns those written."""
    written: list[Checkpoint] = []
    async with db.transaction() as session:
        heads = (await session.scalars(select(AuditChainHead))).all()
        for head in heads:
            if only_if_changed:
                last = await session.scalar(
                    select(AuditCheckpoint)
                    .where(AuditCheckpoint.team_id == head.team_id)
                    .order_by(AuditCheckpoint.id.desc())
                    .limit(1)
                )
                if last is not None and (last.rows, last.head_hash) == (head.seq, head.head_hash):
                    continue
            at = utcnow()
            row = AuditCheckpoint(
                team_id=head.team_id,
                rows=head.seq,
                head_hash=head.head_hash,
                signature=signature(key, head.team_id, head.seq, head.head_hash, at)
                if key
                else None,
                created_at=at,
            )
            session.add(row)
            await session.flush()
            written.append(_of(row))
    return written


class CheckpointJob:
    """A sweeper job: every `every` seconds, checkpoint the chains that grew and post each."""

    def __init__(self, db: Database, key: str | None, every: float, post: Post | None) -> None:
        self.db = db
        self.key = key
        self.every = every
        self.post = post
        self._last = -float("inf")
        self._unposted: list[Checkpoint] = []

    async def __call__(self) -> None:
        if time.monotonic() - self._last < self.every:
            return
        self._last = time.monotonic()
        written = await write_checkpoints(self.db, self.key, only_if_changed=True)
        if self.post is None:
            return
        self._unposted += written
        while self._unposted:
            checkpoint = self._unposted[0]
            try:
                await self.post(checkpoint)
            except Exception:  # the stored checkpoint stands; posting is tried again next time
                log.warning("could not post the audit checkpoint of %s", checkpoint.team_id)
                return
            self._unposted.pop(0)
