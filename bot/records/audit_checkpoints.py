"""Checkpoints of the audit chain: each workspace's head hash and row count at one moment,
signed with `AUDIT_SIGNING_KEY` (HMAC-SHA256) and posted outside the database (to
`AUDIT_CHECKPOINT_CHANNEL`, through a callable the composition root gives), so rows cut off the
end of the chain are noticed by `countersign audit verify`.

A checkpoint vouches for the rows it covers, so none is signed blindly: the rows since the
workspace's previous trusted checkpoint are verified first (`bot.records.audit_walk`), in the
snapshot whose head is signed, and a chain that does not verify gets no checkpoint (an ERROR in
the log and `countersign_audit_checkpoint_refused_total`) until someone looks at it. The job
runs once at start-up before the bot writes anything: with a key just set, that first signed
checkpoint vouches for the plain rows written before it (see `audit_walk`).
"""

from __future__ import annotations

import hmac
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from hashlib import sha256

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bot.db.audit_chain import canonical, iso
from bot.db.models import AuditChainHead, AuditCheckpoint, AuditEntry, utcnow
from bot.db.session import Database
from bot.metrics import AUDIT_CHECKPOINT_REFUSED
from bot.records.audit_walk import Chain, Problem, keyed_rows_exist, walk

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


async def checkpoints_in(session: AsyncSession) -> list[Checkpoint]:
    rows = await session.scalars(select(AuditCheckpoint).order_by(AuditCheckpoint.id))
    return [_of(row) for row in rows.all()]


async def stored_checkpoints(db: Database) -> list[Checkpoint]:
    async with db.reading() as session:
        return await checkpoints_in(session)


@dataclass
class Checkpointing:
    """What `write_checkpoints` did: the checkpoints written, the chains refused."""

    written: list[Checkpoint] = field(default_factory=list)
    refused: list[Problem] = field(default_factory=list)


def _last_trusted(
    checkpoints: list[Checkpoint], team_id: str, key: str | None
) -> Checkpoint | None:
    """The workspace's newest checkpoint this process may build on: with a key, only one
    signed with it."""
    mine = [c for c in checkpoints if c.team_id == team_id]
    if key:
        mine = [c for c in mine if signed_correctly(key, c)]
    return mine[-1] if mine else None


async def _since(
    session: AsyncSession,
    head: AuditChainHead,
    last: Checkpoint | None,
    key: str | None,
    keyed_era: bool,
) -> Problem | None:
    """What is wrong with the chain from `last` (or its start) to its head, if anything."""
    team = head.team_id
    chain = Chain(team, key, last.rows if key and last else 0)
    if last is not None and last.rows:
        row = (
            await session.execute(
                select(AuditEntry.id, AuditEntry.row_hash, AuditEntry.keyed).where(
                    AuditEntry.team_id == team, AuditEntry.seq == last.rows
                )
            )
        ).one_or_none()
        if row is None or row.row_hash != last.head_hash:
            return Problem(
                team,
                last.rows,
                row.id if row else None,
                f"the chain up to here differs from checkpoint {last.source} (rows rewritten "
                "or removed since it was signed)",
            )
        chain.length, chain.head = last.rows, last.head_hash
        chain.keyed_from = last.rows if row.keyed else None
    await walk(session, chain, chain.length)
    found = [p for p in (chain.problem, chain.unvouched_problem(keyed_era)) if p]
    if (head.seq, head.head_hash) != (chain.length, chain.head):
        found.append(
            Problem(
                team,
                min(head.seq, chain.length) + 1,
                None,
                f"the chain head records {head.seq} rows, the chain has {chain.length}",
            )
        )
    return min(found, key=lambda p: p.seq, default=None)


async def write_checkpoints(
    db: Database, key: str | None, only_if_changed: bool = False
) -> Checkpointing:
    """One checkpoint per workspace with a chain (only where it grew since the last one, with
    `only_if_changed`), each signed only after the rows since the previous trusted checkpoint
    verified; a chain that does not verify is refused (logged, counted, nothing signed)."""
    done = Checkpointing()
    verified: list[tuple[str, int, str]] = []
    async with db.reading() as session:  # one snapshot: the head signed is the head verified
        heads = (await session.scalars(select(AuditChainHead))).all()
        stored = await checkpoints_in(session)
        keyed_era = bool(key) and await keyed_rows_exist(session)
        for head in heads:
            last = _last_trusted(stored, head.team_id, key)
            unchanged = last and (last.rows, last.head_hash) == (head.seq, head.head_hash)
            if only_if_changed and unchanged:
                continue
            if problem := await _since(session, head, last, key, keyed_era):
                done.refused.append(problem)
            else:
                verified.append((head.team_id, head.seq, head.head_hash))
    for problem in done.refused:
        AUDIT_CHECKPOINT_REFUSED.inc()
        log.error("audit checkpoint refused: the chain does not verify: %s", problem.line())
    if not verified:
        return done
    async with db.transaction() as session:
        for team_id, rows, head_hash in verified:
            at = utcnow()
            row = AuditCheckpoint(
                team_id=team_id,
                rows=rows,
                head_hash=head_hash,
                signature=signature(key, team_id, rows, head_hash, at) if key else None,
                created_at=at,
            )
            session.add(row)
            await session.flush()
            done.written.append(_of(row))
    return done


class CheckpointJob:
    """A sweeper job: every `every` seconds, checkpoint the chains that grew and post each.
    At start-up it runs before the sweep moves anything (`Sweeper.first`)."""

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
        written = (await write_checkpoints(self.db, self.key, only_if_changed=True)).written
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
