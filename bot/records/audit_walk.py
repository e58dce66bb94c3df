"""Walking one workspace's audit chain row by row: the checks `audit verify` and the checkpoint
job share.

A row whose content or detail no longer matches its hash was edited; a gap in the positions is
a deleted row; a row whose `prev_hash` is not the hash of the row before it was moved
(reordered) or follows a removed or replaced row; a row whose proposal belongs to another
workspace (or to none) was put in a chain it has no place in. A detail replaced by the
redaction marker (retention, `forget`) is not checked (its content is gone on purpose); the
rest of the row is.

Keyed rows (`AUDIT_SIGNING_KEY`): a keyed row's hash must be the HMAC of its content with the
key; a plain row after a keyed row in the same chain was written without the key. A plain row
before the first keyed row is vouched for by that keyed row (whose HMAC covers the hash of
every row before it) or by a signed checkpoint covering it; once any row of the database is
keyed, a plain row nothing vouches for was written by someone without the key (the bot
checkpoints every chain before it writes its first keyed row: see `CheckpointJob`).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from bot.db.audit_chain import GENESIS, REDACTED_DETAIL, content_hash, detail_hash, link
from bot.db.models import AuditEntry, Proposal

BATCH = 5000
NO_WORKSPACE = "(none)"


@dataclass(frozen=True)
class Problem:
    team_id: str
    seq: int
    row_id: int | None
    reason: str

    def line(self) -> str:
        row = f"row id {self.row_id}, " if self.row_id is not None else ""
        return f"workspace {self.team_id}: {row}seq {self.seq}: {self.reason}"


@dataclass
class Chain:
    """One workspace's chain as walked so far. `key`: AUDIT_SIGNING_KEY, if set; `vouched`:
    the rows a correctly signed checkpoint covers; `wanted`: positions whose hash to keep (the
    checkpoints' rows)."""

    team_id: str
    key: str | None = None
    vouched: int = 0
    wanted: set[int] = field(default_factory=set)
    length: int = 0
    head: str = GENESIS
    redacted: int = 0
    keyed_from: int | None = None  # the first keyed row's position (or one at or before it)
    unvouched: tuple[int, int] | None = None  # (seq, id): the first plain row not vouched for
    problem: Problem | None = None
    at: dict[int, str] = field(default_factory=dict)  # seq -> row hash, at `wanted`

    def take(self, row: Any) -> None:
        """The next row of the chain (a row of `rows_of`)."""
        seq = row.seq or 0
        if self.problem is None:
            if seq != self.length + 1:
                self.problem = Problem(
                    self.team_id,
                    self.length + 1,
                    None,
                    f"missing (deleted): the next row present is id {row.id}, seq {seq}",
                )
            elif reason := self._fault(row):
                self.problem = Problem(self.team_id, seq, row.id, reason)
        if row.keyed:
            self.keyed_from = self.keyed_from or seq
            self.unvouched = None  # its hash covers every row before it
        elif seq > self.vouched and self.unvouched is None:
            self.unvouched = (seq, row.id)
        self.length = seq
        self.head = row.row_hash or ""
        self.redacted += row.detail == REDACTED_DETAIL
        if seq in self.wanted:
            self.at[seq] = self.head

    def _fault(self, row: Any) -> str | None:
        if row.detail != REDACTED_DETAIL and detail_hash(row.detail) != row.detail_hash:
            return "edited: its detail does not match the hash it was written with"
        if row.prev_hash != self.head:
            return (
                "out of place: it does not follow the row before it (rows reordered, or the row "
                "before it removed or replaced)"
            )
        if content_hash(row) != row.content_hash:
            return "edited: its content does not match the hash it was written with"
        if row.keyed:
            if self.key is None:
                return "keyed with AUDIT_SIGNING_KEY, which is not set here: it cannot be checked"
            if not hmac.compare_digest(
                link(self.head, row.content_hash, self.key), row.row_hash or ""
            ):
                return (
                    "edited, or written without the key: its hash is not the HMAC of its "
                    "content with AUDIT_SIGNING_KEY"
                )
        elif link(self.head, row.content_hash) != row.row_hash:
            return "edited: its content does not match the hash it was written with"
        elif self.keyed_from is not None:
            return "not keyed, after keyed rows began: written by someone without AUDIT_SIGNING_KEY"
        if row.proposal_team != self.team_id:
            if row.proposal_team is None:
                return f"its proposal #{row.proposal_id} does not exist"
            return (
                f"in the wrong chain: its proposal #{row.proposal_id} belongs to workspace "
                f"{row.proposal_team}"
            )
        return None

    def unvouched_problem(self, keyed_era: bool) -> Problem | None:
        """With the key set and keyed rows in the database: the first plain row that neither a
        keyed row after it nor a signed checkpoint vouches for."""
        if not (self.key and keyed_era and self.unvouched and self.keyed_from is None):
            return None
        seq, row_id = self.unvouched
        return Problem(
            self.team_id,
            seq,
            row_id,
            "not keyed, and neither a keyed row after it nor a signed checkpoint vouches for "
            "it: written by someone without AUDIT_SIGNING_KEY",
        )


async def walk(session: AsyncSession, chain: Chain, after: int = 0) -> Chain:
    """Take every row of `chain`'s workspace after position `after`, in order, in `session`
    (one snapshot: see `Database.reading`)."""
    last = after
    while True:
        # Table rows, not ORM objects: the same columns, read about twice as fast.
        rows = (
            await session.execute(
                select(*AuditEntry.__table__.columns, Proposal.team_id.label("proposal_team"))
                .outerjoin(Proposal, Proposal.id == AuditEntry.proposal_id)
                .where(AuditEntry.team_id == chain.team_id, AuditEntry.seq > last)
                .order_by(AuditEntry.seq)
                .limit(BATCH)
            )
        ).all()
        for row in rows:
            last = row.seq or 0
            chain.take(row)
        if len(rows) < BATCH:
            return chain


async def keyed_rows_exist(session: AsyncSession) -> bool:
    """Whether any audit row is keyed: the key is in use, and plain rows need a voucher."""
    found = await session.scalar(select(AuditEntry.id).where(AuditEntry.keyed).limit(1))
    return found is not None


async def outside_chains(session: AsyncSession) -> Problem | None:
    """Rows with no workspace or no position: in no chain, so no chain's check covers them."""
    outside = or_(AuditEntry.team_id.is_(None), AuditEntry.seq.is_(None))
    count = await session.scalar(select(func.count()).select_from(AuditEntry).where(outside))
    if not count:
        return None
    first = (
        await session.execute(
            select(AuditEntry.id, AuditEntry.team_id, AuditEntry.seq)
            .where(outside)
            .order_by(AuditEntry.id)
            .limit(1)
        )
    ).one()
    what = "no workspace" if first.team_id is None else "no position"
    return Problem(
        first.team_id or NO_WORKSPACE,
        first.seq or 0,
        first.id,
        f"not in any chain ({what}): {count} such row(s), written outside the audit chain",
    )
