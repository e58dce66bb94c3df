"""`countersign audit verify`: recompute every workspace's audit chain and check it against the
checkpoints (stored, and posted to Slack when given).

A row whose content or detail no longer matches its hash was edited; a gap in the positions is
a deleted row; a row whose `prev_hash` is not the hash of the row before it was moved
(reordered) or follows a removed or replaced row; a chain shorter than a checkpoint, or whose
hash at a checkpoint's row differs from the checkpoint's head, was truncated or rewritten. A
checkpoint whose signature is wrong was forged. A detail replaced by the redaction marker
(retention, `forget`) is not checked (its content is gone on purpose); the rest of the row is.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select

from bot.db.audit_chain import GENESIS, REDACTED_DETAIL, content_hash, detail_hash, link
from bot.db.models import AuditChainHead, AuditEntry
from bot.db.session import Database
from bot.records.audit_checkpoints import Checkpoint, signed_correctly, stored_checkpoints

BATCH = 5000


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
    """What the scan of one workspace's chain found."""

    team_id: str
    length: int = 0
    head: str = GENESIS
    redacted: int = 0
    problem: Problem | None = None
    at: dict[int, str] = field(default_factory=dict)  # seq -> row hash, at checkpoints


@dataclass
class Report:
    rows: int = 0
    redacted: int = 0
    checkpoints: int = 0
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def first_bad(self) -> Problem | None:
        return min(self.problems, key=lambda p: (p.team_id, p.seq), default=None)


def _check_row(chain: Chain, row: Any) -> str | None:
    """What is wrong with the row that comes next in the chain, if anything."""
    if row.detail != REDACTED_DETAIL and detail_hash(row.detail) != row.detail_hash:
        return "edited: its detail does not match the hash it was written with"
    if row.prev_hash != chain.head:
        return (
            "out of place: it does not follow the row before it (rows reordered, or the row "
            "before it removed or replaced)"
        )
    if content_hash(row) != row.content_hash or link(chain.head, row.content_hash) != row.row_hash:
        return "edited: its content does not match the hash it was written with"
    return None


async def _scan(db: Database, team_id: str, wanted: set[int]) -> Chain:
    chain = Chain(team_id)
    last = 0
    while True:
        async with db.reading() as session:
            # Table rows, not ORM objects: the same columns, read about twice as fast.
            rows = (
                await session.execute(
                    select(*AuditEntry.__table__.columns)
                    .where(AuditEntry.team_id == team_id, AuditEntry.seq > last)
                    .order_by(AuditEntry.seq)
                    .limit(BATCH)
                )
            ).all()
        for row in rows:
            seq = row.seq or 0
            last = seq
            if chain.problem is None:
                if seq != chain.length + 1:
                    chain.problem = Problem(
                        team_id,
                        chain.length + 1,
                        None,
                        f"missing (deleted): the next row present is id {row.id}, seq {seq}",
                    )
                elif reason := _check_row(chain, row):
                    chain.problem = Problem(team_id, seq, row.id, reason)
            chain.length = seq
            chain.head = row.row_hash or ""
            chain.redacted += row.detail == REDACTED_DETAIL
            if seq in wanted:
                chain.at[seq] = chain.head
        if len(rows) < BATCH:
            return chain


def _against(chain: Chain, checkpoint: Checkpoint, key: str | None) -> Problem | None:
    team = chain.team_id
    if key and checkpoint.signature and not signed_correctly(key, checkpoint):
        return Problem(
            team,
            checkpoint.rows,
            None,
            f"checkpoint {checkpoint.source} has a bad signature (forged, or signed with "
            "another key)",
        )
    if checkpoint.rows > chain.length:
        return Problem(
            team,
            chain.length + 1,
            None,
            f"missing (truncated): checkpoint {checkpoint.source} of {_when(checkpoint)} "
            f"recorded {checkpoint.rows} rows, the chain has {chain.length}",
        )
    if checkpoint.rows and chain.at.get(checkpoint.rows) != checkpoint.head_hash:
        return Problem(
            team,
            checkpoint.rows,
            None,
            f"the chain up to here differs from checkpoint {checkpoint.source} of "
            f"{_when(checkpoint)} (rows rewritten)",
        )
    return None


def _when(checkpoint: Checkpoint) -> str:
    return checkpoint.at.strftime("%Y-%m-%d %H:%M:%SZ")


async def verify(db: Database, key: str | None, posted: Iterable[Checkpoint] = ()) -> Report:
    checkpoints = [*await stored_checkpoints(db), *posted]
    report = Report()
    if not key:
        report.notes.append(
            "AUDIT_SIGNING_KEY is not set: checkpoints are unsigned and their signatures are "
            "not checked, so a forged checkpoint would not be noticed"
        )
    trusted: list[Checkpoint] = []
    for checkpoint in checkpoints:
        if key and not checkpoint.signature:
            report.notes.append(f"checkpoint {checkpoint.source} is unsigned: not trusted")
        else:
            trusted.append(checkpoint)
    async with db.reading() as session:
        heads = {h.team_id: h for h in (await session.scalars(select(AuditChainHead))).all()}
        teams = set((await session.scalars(select(AuditEntry.team_id).distinct())).all()) | set(
            heads
        )
        unchained = await session.scalar(select(AuditEntry.id).where(AuditEntry.seq.is_(None)))
    if unchained is not None:
        report.problems.append(Problem("?", 0, unchained, "not in any chain (no position)"))
    teams |= {c.team_id for c in trusted}
    for team in sorted(t for t in teams if t is not None):
        mine = [c for c in trusted if c.team_id == team]
        chain = await _scan(db, team, {c.rows for c in mine})
        report.rows += chain.length
        report.redacted += chain.redacted
        found = [chain.problem] if chain.problem else []
        head = heads.get(team)
        if head is not None and (head.seq, head.head_hash) != (chain.length, chain.head):
            found.append(
                Problem(
                    team,
                    chain.length + 1 if head.seq > chain.length else max(head.seq, 1),
                    None,
                    f"the chain head records {head.seq} rows, the chain has {chain.length} "
                    "(rows removed from the end, or the head changed)",
                )
            )
        for checkpoint in sorted(mine, key=lambda c: c.rows):
            report.checkpoints += 1
            if problem := _against(chain, checkpoint, key):
                found.append(problem)
        if found:
            report.problems.append(min(found, key=lambda p: p.seq))
    return report


def render(report: Report) -> list[str]:
    """The lines `audit verify` prints."""
    lines = [f"note: {note}" for note in report.notes]
    summary = (
        f"{report.rows} audit row(s) ({report.redacted} with a redacted detail), "
        f"{report.checkpoints} checkpoint(s) checked"
    )
    first = report.first_bad()
    if first is None:
        return [*lines, f"OK: the audit chain holds: {summary}"]
    lines.append(f"FAILED: first bad row: {first.line()}")
    lines += [f"  {p.line()}" for p in report.problems if p is not first]
    return [*lines, summary]
