"""Audit that cannot be quietly extended (issue 25, finding 6): what someone with write access
to the database, but not AUDIT_SIGNING_KEY, may try, and what `audit verify`, the checkpoint
job and `audit export` make of it, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import csv
import logging
from collections.abc import AsyncIterator
from datetime import timedelta
from itertools import pairwise
from pathlib import Path

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import delete, select, update

from bot.approvals.ledger import Ledger
from bot.db.audit_chain import GENESIS, seal
from bot.db.migrate import upgrade_to_head
from bot.db.models import (
    AuditChainHead,
    AuditCheckpoint,
    AuditEntry,
    ProposalApproval,
    ProposalState,
    utcnow,
)
from bot.db.session import Database
from bot.records.audit_checkpoints import CheckpointJob, stored_checkpoints, write_checkpoints
from bot.records.audit_verify import verify
from tests.fakes.openai import FakeOpenAI
from tests.fakes.slack import TEAM_ID, FakeSlack
from tests.harness import RunningBot, clean_env, make_settings, run_cli, start_bot, stop_bot
from tests.test_approvals_flow import proposals
from tests.test_approvals_rules import propose_create
from tests.test_audit_chain import KEY, build_chain, new_proposal, rows

REFUSED = "countersign_audit_checkpoint_refused_total"


def verify_cli(url: str, tmp_path: Path, **env: str) -> tuple[int, str]:
    """`countersign audit verify` with the database and the audit settings only: no Slack or
    model settings."""
    result = run_cli(["audit", "verify"], clean_env(DATABASE_URL=url, **env), tmp_path)
    assert not result.stderr.strip() or "Traceback" not in result.stderr, result.stderr
    return result.returncode, result.stdout


def first_bad(output: str) -> str:
    return next(line for line in output.splitlines() if "first bad row" in line)


async def forge(
    db: Database,
    team_id: str | None,
    proposal_id: int,
    *,
    seq: int | None = None,
    keyed_claim: bool = False,
) -> AuditEntry:
    """What someone with write access and no key does: an approval row with plain hashes,
    recomputed the way `audit_chain` documents them, at the end of `team_id`'s chain (a new
    chain if there is none), the chain head moved along."""
    async with db.transaction() as session:
        head = await session.get(AuditChainHead, team_id) if team_id else None
        number, prev = (head.seq, head.head_hash) if head else (0, GENESIS)
        entry = AuditEntry(
            team_id=team_id,
            seq=seq or number + 1,
            proposal_id=proposal_id,
            from_state="proposed",
            to_state="approved",
            event="approve",
            actor="UMALLORY",
            detail={"approvers": ["UMALLORY"]},
            created_at=utcnow(),
        )
        seal(entry, prev)
        if keyed_claim:
            entry.keyed = True
        session.add(entry)
        if head is not None:
            head.seq, head.head_hash = entry.seq or 0, entry.row_hash or ""
        elif team_id is not None:
            session.add(AuditChainHead(team_id=team_id, seq=1, head_hash=entry.row_hash))
    return entry


@pytest.fixture
async def chain_bot(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, migrated_database_url: str
) -> AsyncIterator[RunningBot]:
    running = await start_bot(
        make_settings(fake_slack, fake_model, migrated_database_url, streaming="auto")
    )
    yield running
    await stop_bot(running)


async def test_a_row_in_a_made_up_workspace_chain_on_a_real_proposal_fails(
    chain_bot: RunningBot,
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    migrated_database_url: str,
    tmp_path: Path,
) -> None:
    await build_chain(chain_bot, fake_slack, fake_model)
    db = chain_bot.countersign.db
    first, _ = await proposals(chain_bot)
    forged = await forge(db, "TFAKE", first.id)  # a chain of its own, consistent in itself
    code, out = verify_cli(migrated_database_url, tmp_path)
    assert code == 1, out
    line = first_bad(out)
    assert f"workspace TFAKE: row id {forged.id}, seq 1: in the wrong chain" in line
    assert f"its proposal #{first.id} belongs to workspace {TEAM_ID}" in line
    # The export reads the proposal's own chain: the forged approval is not in its columns.
    values = clean_env(DATABASE_URL=migrated_database_url)
    out_file = tmp_path / "audit.csv"
    exported = run_cli(["audit", "export", "-o", str(out_file)], values, tmp_path)
    assert exported.returncode == 0, exported.stderr
    row = next(r for r in csv.DictReader(out_file.open()) if r["proposal_id"] == str(first.id))
    assert (row["decided_by"], row["approvers"]) == ("UALICE", "UALICE")


async def test_a_row_with_no_workspace_fails(
    chain_bot: RunningBot,
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    migrated_database_url: str,
    tmp_path: Path,
) -> None:
    await build_chain(chain_bot, fake_slack, fake_model)
    first, _ = await proposals(chain_bot)
    forged = await forge(chain_bot.countersign.db, None, first.id, seq=1)
    code, out = verify_cli(migrated_database_url, tmp_path)
    assert code == 1, out
    assert (
        f"workspace (none): row id {forged.id}, seq 1: not in any chain (no workspace)"
        in first_bad(out)
    )


async def test_with_the_key_a_row_recomputed_with_plain_hashes_fails(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, migrated_database_url: str, tmp_path: Path
) -> None:
    bot = await start_bot(
        make_settings(
            fake_slack, fake_model, migrated_database_url, audit_signing_key=KEY, streaming="auto"
        )
    )
    try:
        await build_chain(bot, fake_slack, fake_model)
        db = bot.countersign.db
        chain = await rows(db)
        assert all(r.keyed for r in chain)
        assert all(r.prev_hash == p.row_hash for p, r in pairwise(chain))
        code, out = verify_cli(migrated_database_url, tmp_path, AUDIT_SIGNING_KEY=KEY)
        assert code == 0, out
        assert "OK: the audit chain holds: 7 audit row(s)" in out
        # Without the key nobody can check (or write) a keyed row: verify says so.
        code, out = verify_cli(migrated_database_url, tmp_path)
        assert code == 1, out
        assert "seq 1: keyed with AUDIT_SIGNING_KEY, which is not set here" in first_bad(out)
        first, _ = await proposals(bot)
        forged = await forge(db, TEAM_ID, first.id)  # says it is plain, hashes recomputed
        code, out = verify_cli(migrated_database_url, tmp_path, AUDIT_SIGNING_KEY=KEY)
        assert code == 1, out
        assert f"row id {forged.id}, seq 8: not keyed, after keyed rows began" in first_bad(out)
        async with db.transaction() as session:  # says it is keyed: its hash is no HMAC
            await session.execute(
                update(AuditEntry).where(AuditEntry.id == forged.id).values(keyed=True)
            )
        code, out = verify_cli(migrated_database_url, tmp_path, AUDIT_SIGNING_KEY=KEY)
        assert code == 1, out
        assert f"row id {forged.id}, seq 8: edited, or written without the key" in first_bad(out)
        code, out = verify_cli(migrated_database_url, tmp_path, AUDIT_SIGNING_KEY="another key")
        assert code == 1, out
        assert "seq 1: edited, or written without the key" in first_bad(out)
    finally:
        await stop_bot(bot)


async def test_turning_the_key_on_keeps_old_rows_and_vouches_only_for_them(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, migrated_database_url: str, tmp_path: Path
) -> None:
    """A database written without the key for a while: the bot, started with it, checkpoints
    every chain (signed) before it writes its first keyed row. The plain rows before stay
    verifiable; a plain row or chain added afterwards is not vouched for and fails."""
    plain = await start_bot(
        make_settings(fake_slack, fake_model, migrated_database_url, streaming="auto")
    )
    try:
        await propose_create(plain, fake_slack, fake_model)
        async with plain.countersign.db.transaction() as session:
            other = new_proposal("TOTHER", "k-other")  # a workspace quiet since
            other.expires_at = utcnow() + timedelta(hours=1)
            session.add(other)
        await Ledger(plain.countersign.db).audit_only(other.id, "refused", "UBOB", {"n": 1})
    finally:
        await stop_bot(plain)
    keyed = await start_bot(
        make_settings(
            fake_slack, fake_model, migrated_database_url, audit_signing_key=KEY, streaming="auto"
        )
    )
    try:
        db = keyed.countersign.db
        await propose_create(keyed, fake_slack, fake_model)
        chain = await rows(db)
        assert [(r.team_id, r.keyed) for r in chain if r.team_id == TEAM_ID] == [
            (TEAM_ID, False),
            (TEAM_ID, True),
        ]
        checkpoints = await stored_checkpoints(db)
        assert {(c.team_id, c.rows) for c in checkpoints} == {(TEAM_ID, 1), ("TOTHER", 1)}
        assert all(c.signature for c in checkpoints)
        code, out = verify_cli(migrated_database_url, tmp_path, AUDIT_SIGNING_KEY=KEY)
        assert code == 0, out
        forged = await forge(db, "TOTHER", other.id)
        code, out = verify_cli(migrated_database_url, tmp_path, AUDIT_SIGNING_KEY=KEY)
        assert code == 1, out
        line = first_bad(out)
        assert f"workspace TOTHER: row id {forged.id}, seq 2: not keyed, and neither" in line
        async with db.transaction() as session:
            await session.execute(delete(AuditEntry).where(AuditEntry.id == forged.id))
            await session.execute(
                update(AuditChainHead)
                .where(AuditChainHead.team_id == "TOTHER")
                .values(seq=1, head_hash=forged.prev_hash)
            )
            made_up = new_proposal("TNEW", "k-new")  # a whole new workspace, proposal and all
            made_up.expires_at = utcnow() + timedelta(hours=1)
            session.add(made_up)
        assert verify_cli(migrated_database_url, tmp_path, AUDIT_SIGNING_KEY=KEY)[0] == 0
        forged = await forge(db, "TNEW", made_up.id)
        code, out = verify_cli(migrated_database_url, tmp_path, AUDIT_SIGNING_KEY=KEY)
        assert code == 1, out
        assert f"workspace TNEW: row id {forged.id}, seq 1: not keyed, and neither" in (
            first_bad(out)
        )
    finally:
        await stop_bot(keyed)


async def _rewrite(db: Database, seq: int, recompute: bool) -> None:
    """Row `seq` says UMALLORY did it; with `recompute`, every hash from there to the head is
    recomputed (plain: the rewriter has no key) and the head moved along."""
    async with db.transaction() as session:
        chain = list((await session.scalars(select(AuditEntry).order_by(AuditEntry.seq))).all())
        chain[seq - 1].actor = "UMALLORY"
        if recompute:
            for before, row in pairwise(chain[seq - 2 :]):
                seal(row, before.row_hash or "")
            head = await session.get(AuditChainHead, TEAM_ID)
            assert head is not None
            head.head_hash = chain[-1].row_hash or ""


@pytest.mark.parametrize(
    ("key", "seq", "recompute", "reason"),
    [
        (None, 5, False, "seq 5: edited: its content does not match"),
        (KEY, 5, True, "seq 5: not keyed, after keyed rows began"),
        (None, 2, True, "seq 3: the chain up to here differs from checkpoint database #1"),
    ],
    ids=["edited-since", "recomputed-since-with-key", "recomputed-under-the-checkpoint"],
)
async def test_the_checkpoint_job_refuses_a_chain_rewritten_since_its_last_checkpoint(
    migrated_database_url: str,
    key: str | None,
    seq: int,
    recompute: bool,
    reason: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    db = Database.from_url(migrated_database_url, audit_key=key)
    try:
        await upgrade_to_head(db)
        async with db.transaction() as session:
            proposal = new_proposal(TEAM_ID, "k")
            session.add(proposal)
        ledger = Ledger(db)
        for n in range(3):
            await ledger.audit_only(proposal.id, "refused", f"U{n}", {"n": n})
        job = CheckpointJob(db, key, 0, None)
        await job()
        (checkpoint,) = await stored_checkpoints(db)
        assert (checkpoint.rows, checkpoint.signature is not None) == (3, key is not None)
        for n in range(3, 6):
            await ledger.audit_only(proposal.id, "refused", f"U{n}", {"n": n})
        await _rewrite(db, seq, recompute)
        refused = REGISTRY.get_sample_value(REFUSED) or 0.0
        caplog.set_level(logging.ERROR, logger="bot.records.audit_checkpoints")
        await job()
        assert len(await stored_checkpoints(db)) == 1  # nothing signed
        assert REGISTRY.get_sample_value(REFUSED) == refused + 1
        (record,) = [r for r in caplog.records if r.levelno == logging.ERROR]
        message = record.getMessage()
        assert "audit checkpoint refused" in message
        assert f"workspace {TEAM_ID}" in message
        assert reason in message
        assert KEY not in caplog.text
        await job()  # and again at the next run: nothing is signed until someone looks
        assert len(await stored_checkpoints(db)) == 1
        assert REGISTRY.get_sample_value(REFUSED) == refused + 2
    finally:
        await db.dispose()


async def test_the_export_reads_decisions_from_the_chain_not_the_proposals_table(
    chain_bot: RunningBot,
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    migrated_database_url: str,
    tmp_path: Path,
) -> None:
    await build_chain(chain_bot, fake_slack, fake_model)
    first, second = await proposals(chain_bot)
    async with chain_bot.countersign.db.transaction() as session:
        await session.execute(
            update(type(first))
            .where(type(first).id.in_([first.id, second.id]))
            .values(decided_by="UMALLORY", state=ProposalState.SUCCEEDED)
        )
        await session.execute(delete(ProposalApproval))
        session.add(ProposalApproval(proposal_id=second.id, approver="UMALLORY"))
    out_file = tmp_path / "audit.csv"
    values = clean_env(DATABASE_URL=migrated_database_url)  # no Slack or model settings needed
    exported = run_cli(["audit", "export", "-o", str(out_file)], values, tmp_path)
    assert exported.returncode == 0, exported.stderr
    got = [
        (r["decision"], r["decided_by"], r["approvers"]) for r in csv.DictReader(out_file.open())
    ]
    assert got == [("succeeded", "UALICE", "UALICE"), ("declined", "UALICE", "")]


async def test_verify_and_checkpoints_while_the_bot_writes_raise_no_false_alarm(
    migrated_database_url: str,
) -> None:
    """Two workspaces' chains grow without pause through the real append path (the ledger)
    on one engine while another verifies 20 times and checkpoints: every run holds."""
    writer, reader = (
        Database.from_url(migrated_database_url),
        Database.from_url(migrated_database_url),
    )
    try:
        await upgrade_to_head(writer)
        async with writer.transaction() as session:
            made = [new_proposal(team, f"k-{team}") for team in ("TONE", "TTWO")]
            session.add_all(made)
        ledger = Ledger(writer)
        for n in range(150):
            for proposal in made:
                await ledger.audit_only(proposal.id, "refused", f"U{n}", {"n": n})
        stop = asyncio.Event()

        async def write(proposal_id: int) -> None:
            n = 0
            while not stop.is_set():
                await ledger.audit_only(proposal_id, "refused", "UWRITER", {"n": n})
                n += 1

        async def count() -> int:
            async with reader.reading() as session:
                return len((await session.scalars(select(AuditEntry.id))).all())

        writers = [asyncio.create_task(write(p.id)) for p in made]
        try:
            grew = 0
            for _ in range(20):
                before = await count()
                report = await verify(reader, None)
                assert report.ok, [p.line() for p in report.problems]
                done = await write_checkpoints(reader, None, only_if_changed=True)
                assert not done.refused, [p.line() for p in done.refused]
                grew += await count() > before
        finally:
            stop.set()
            await asyncio.gather(*writers)
        assert grew >= 15  # the writers did write while verify ran
        report = await verify(reader, None)
        assert report.ok, report.problems
        assert report.checkpoints >= 20
    finally:
        await writer.dispose()
        await reader.dispose()


async def test_no_checkpoints_is_a_warning_and_verify_needs_no_slack_or_model_settings(
    migrated_database_url: str, tmp_path: Path
) -> None:
    db = Database.from_url(migrated_database_url)
    try:
        await upgrade_to_head(db)
        async with db.transaction() as session:
            proposal = new_proposal(TEAM_ID, "k")
            session.add(proposal)
        await Ledger(db).audit_only(proposal.id, "refused", "UBOB", {"n": 1})
        async with db.transaction() as session:
            assert (await session.scalars(select(AuditCheckpoint))).all() == []
    finally:
        await db.dispose()
    code, out = verify_cli(migrated_database_url, tmp_path)
    assert code == 0, out
    assert "warning: no checkpoints: rows removed from the end of a chain" in out
    assert "OK: the audit chain holds: 1 audit row(s)" in out
    written = run_cli(
        ["audit", "checkpoint"], clean_env(DATABASE_URL=migrated_database_url), tmp_path
    )
    assert written.returncode == 0, written.stdout + written.stderr
    code, out = verify_cli(migrated_database_url, tmp_path)
    assert code == 0, out
    assert "warning: no checkpoints" not in out
    assert "1 checkpoint(s) checked" in out
