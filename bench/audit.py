"""Audit chain benchmark: what chaining adds to an audited transition, and how long
`countersign audit verify` takes.

    uv run python -m bench.audit                          # SQLite and PostgreSQL
    uv run python -m bench.audit --rows 100000 --transitions 1000 --no-postgres

Per backend: TRANSITIONS audited transactions written the way the ledger writes them (lock the
workspace's chain head, as a decision does before it locks the proposal, then append: lock
again, hash the row, link it, update the head, commit), against the same
transactions writing an unchained row (what every transition did before), one at a time; the
difference of the medians is the added cost. Then ROWS chained rows are bulk-loaded and
`verify` recomputes them (one run).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from sqlalchemy import delete, insert

from bot.db.audit_chain import GENESIS, append, lock_head, seal
from bot.db.migrate import upgrade_to_head
from bot.db.models import AuditChainHead, AuditEntry, Proposal, ProposalState, utcnow
from bot.db.session import Database
from bot.records.audit_verify import verify
from tests.pg import temporary_database

TEAM = "TBENCH"
COLUMNS = [c.name for c in AuditEntry.__table__.columns if c.name != "id"]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _proposal(db: Database, team: str = TEAM) -> int:
    async with db.transaction() as session:
        proposal = Proposal(
            team_id=team,
            tool_call_id="c",
            tool_name="create_task",
            arguments={},
            arguments_hash="h",
            description="d",
            preview=[],
            requester="UALICE",
            idempotency_key=f"k{time.monotonic_ns()}",
            state=ProposalState.PROPOSED,
            expires_at=utcnow(),
            channel_id="C1",
        )
        session.add(proposal)
        await session.flush()
        return proposal.id


DETAIL: dict[str, Any] = {"votes": 1, "required": 1, "revision": 1, "arguments_hash": "a" * 64}


async def transitions(db: Database, count: int) -> tuple[list[float], list[float]]:
    proposal_id = await _proposal(db)
    plain: list[float] = []
    chained: list[float] = []
    for n in range(count * 2):
        start = time.perf_counter()
        async with db.transaction() as session:
            if n % 2:
                await lock_head(session, TEAM)  # as `_deciding` and `_apply` do first
                await append(
                    session,
                    team_id=TEAM,
                    proposal_id=proposal_id,
                    from_state="proposed",
                    to_state="proposed",
                    event="vote",
                    actor="UBOB",
                    detail=DETAIL,
                )
            else:
                session.add(
                    AuditEntry(
                        proposal_id=proposal_id,
                        from_state="proposed",
                        to_state="proposed",
                        event="vote",
                        actor="UBOB",
                        detail=DETAIL,
                    )
                )
        (chained if n % 2 else plain).append(time.perf_counter() - start)
    return plain, chained


async def load_chain(db: Database, rows: int) -> None:
    proposal_id = await _proposal(db, "TVERIFY")  # a row's proposal is of its workspace
    prev, batch = GENESIS, []
    async with db.transaction() as session:
        for seq in range(1, rows + 1):
            entry = AuditEntry(
                team_id="TVERIFY",
                seq=seq,
                proposal_id=proposal_id,
                from_state="proposed",
                to_state="approved",
                event="approve",
                actor="UBOB",
                detail=DETAIL,
                created_at=utcnow(),
            )
            seal(entry, prev)
            prev = entry.row_hash or ""
            batch.append({c: getattr(entry, c) for c in COLUMNS})
            if len(batch) == 5000 or seq == rows:
                await session.execute(insert(AuditEntry), batch)
                batch = []
        session.add(AuditChainHead(team_id="TVERIFY", seq=rows, head_hash=prev))


async def run(url: str, label: str, count: int, rows: int) -> None:
    db = Database.from_url(url)
    try:
        await upgrade_to_head(db)
        await transitions(db, 50)  # warm up
        plain, chained = await transitions(db, count)
        ms = [1000 * pct(v, q) for v in (plain, chained) for q in (0.5, 0.99)]
        print(
            f"{label}: audited transaction p50/p99 {ms[0]:.2f}/{ms[1]:.2f} ms unchained, "
            f"{ms[2]:.2f}/{ms[3]:.2f} ms chained: +{ms[2] - ms[0]:.2f} ms p50, "
            f"+{ms[3] - ms[1]:.2f} ms p99 ({count} each)"
        )
        async with db.transaction() as session:  # only the chain to verify stays
            await session.execute(delete(AuditEntry))
            await session.execute(delete(AuditChainHead))
        await load_chain(db, rows)
        start = time.perf_counter()
        report = await verify(db, None)
        took = time.perf_counter() - start
        assert report.ok, report.problems
        print(f"{label}: audit verify of {report.rows:,} rows: {took:.2f} s")
    finally:
        await db.dispose()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--transitions", type=int, default=1000)
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'bench.db'}"
        await run(url, "SQLite", args.transitions, args.rows)
    if not args.no_postgres:
        async with temporary_database() as url:
            await run(url, "PostgreSQL", args.transitions, args.rows)


if __name__ == "__main__":
    asyncio.run(main())
