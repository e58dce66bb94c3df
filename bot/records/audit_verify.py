"""`countersign audit verify`: recompute every workspace's audit chain and check it against the
checkpoints (stored, and posted to Slack when given), all read from one snapshot of the
database, so a bot writing meanwhile raises no false alarm.

The row checks are `bot.records.audit_walk`'s. A chain shorter than a checkpoint, or whose hash
at a checkpoint's row differs from the checkpoint's head, was truncated or rewritten; a chain
head that disagrees with its rows lost rows from the end. A checkpoint whose signature is wrong
was forged. Rows with no workspace are in no chain: a failure. No checkpoint at all is a
warning (rows cut off the end would go unnoticed), not a failure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from sqlalchemy import select

from bot.db.models import AuditChainHead, AuditEntry
from bot.db.session import Database
from bot.records.audit_checkpoints import Checkpoint, checkpoints_in, signed_correctly
from bot.records.audit_walk import Chain, Problem, outside_chains, walk

__all__ = ["Problem", "Report", "render", "verify"]


@dataclass
class Report:
    rows: int = 0
    redacted: int = 0
    checkpoints: int = 0
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def first_bad(self) -> Problem | None:
        return min(self.problems, key=lambda p: (p.team_id, p.seq), default=None)


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
    report = Report()
    if not key:
        report.notes.append(
            "AUDIT_SIGNING_KEY is not set: rows written with it and checkpoints' signatures are "
            "not checked, so a forged row or checkpoint would not be noticed"
        )
    async with db.reading() as session:  # one snapshot: heads, rows and checkpoints agree
        checkpoints = [*await checkpoints_in(session), *posted]
        trusted = _trusted(report, checkpoints, key)
        heads = {h.team_id: h for h in (await session.scalars(select(AuditChainHead))).all()}
        named = (await session.scalars(select(AuditEntry.team_id).distinct())).all()
        teams = {t for t in named if t is not None} | set(heads) | {c.team_id for c in trusted}
        if outside := await outside_chains(session):
            report.problems.append(outside)
        chains = []
        for team in sorted(teams):
            mine = [c for c in trusted if c.team_id == team]
            signed = [c.rows for c in mine if key and signed_correctly(key, c)]
            chain = Chain(team, key, max(signed, default=0), {c.rows for c in mine})
            chains.append(await walk(session, chain))
    keyed_era = any(c.keyed_from is not None for c in chains)
    if key and not keyed_era and chains:
        report.notes.append(
            "AUDIT_SIGNING_KEY is set, but no audit row is keyed with it yet (the bot keys "
            "the rows it writes once it runs with the key): rows are checked as plain hashes"
        )
    for chain in chains:
        report.rows += chain.length
        report.redacted += chain.redacted
        found = [p for p in (chain.problem, chain.unvouched_problem(keyed_era)) if p]
        head = heads.get(chain.team_id)
        if head is not None and (head.seq, head.head_hash) != (chain.length, chain.head):
            found.append(
                Problem(
                    chain.team_id,
                    chain.length + 1 if head.seq > chain.length else max(head.seq, 1),
                    None,
                    f"the chain head records {head.seq} rows, the chain has {chain.length} "
                    "(rows removed from the end, or the head changed)",
                )
            )
        for checkpoint in sorted(trusted, key=lambda c: c.rows):
            if checkpoint.team_id != chain.team_id:
                continue
            report.checkpoints += 1
            if problem := _against(chain, checkpoint, key):
                found.append(problem)
        if found:
            report.problems.append(min(found, key=lambda p: p.seq))
    if not report.checkpoints:
        report.warnings.append(
            "no checkpoints: rows removed from the end of a chain (its head moved back with "
            "them) would not be noticed; they are written every AUDIT_CHECKPOINT_EVERY while "
            "the bot runs, or now by `countersign audit checkpoint`"
        )
    return report


def _trusted(report: Report, checkpoints: list[Checkpoint], key: str | None) -> list[Checkpoint]:
    trusted: list[Checkpoint] = []
    for checkpoint in checkpoints:
        if key and not checkpoint.signature:
            report.notes.append(f"checkpoint {checkpoint.source} is unsigned: not trusted")
        else:
            trusted.append(checkpoint)
    return trusted


def render(report: Report) -> list[str]:
    """The lines `audit verify` prints."""
    lines = [f"note: {note}" for note in report.notes]
    lines += [f"warning: {warning}" for warning in report.warnings]
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
