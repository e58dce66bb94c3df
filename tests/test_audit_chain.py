"""A record nobody can quietly change: the audit log is a hash chain per workspace, checked by
`countersign audit verify` against signed checkpoints, in the database and posted to Slack."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import Connection, delete, select, text, update

from bot.approvals.errors import AlreadyHandled
from bot.approvals.ledger import Ledger
from bot.approvals.machine import Event
from bot.approvals.service import ApprovalsService
from bot.db.migrate import alembic_config, upgrade_to_head
from bot.db.models import (
    AuditChainHead,
    AuditCheckpoint,
    AuditEntry,
    Proposal,
    ProposalState,
    utcnow,
)
from bot.db.session import Database
from bot.records.audit_verify import verify
from bot.records.retention import forget_user, purge
from bot.slack import cards
from tests.fakes.openai import FakeOpenAI
from tests.fakes.slack import TEAM_ID, FakeSlack
from tests.harness import RunningBot, clean_env, make_settings, run_cli, start_bot, stop_bot
from tests.test_approvals_flow import proposals
from tests.test_approvals_rules import propose_create

KEY = "audit-signing-key-for-tests"


@pytest.fixture
async def chain_bot(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, migrated_database_url: str
) -> AsyncIterator[RunningBot]:
    running = await start_bot(
        make_settings(fake_slack, fake_model, migrated_database_url, streaming="auto")
    )
    yield running
    await stop_bot(running)


async def build_chain(bot: RunningBot, slack: FakeSlack, model: FakeOpenAI) -> None:
    """Seven audited steps through the front door: two proposals, an edit, an approval with
    its execution, and a decline."""
    await propose_create(bot, slack, model)
    await propose_create(bot, slack, model)
    first, second = await proposals(bot)
    await bot.click_value(first.id, cards.EDIT, "UALICE", "C1", slack)
    await bot.idle()
    status, _ = await bot.submit_view(
        slack.views[-1]["view"],
        "UALICE",
        {"title": "Fix SSO", "priority": "high", "due_date": "2026-11-30", "description": "x"},
    )
    assert status == 200
    await bot.idle()
    await bot.click_value(first.id, cards.APPROVE, "UALICE", "C1", slack)
    await bot.idle()
    await bot.click_value(second.id, cards.DECLINE, "UALICE", "C1", slack)
    await bot.idle()
    await bot.submit_view(slack.views[-1]["view"], "UALICE", {"reason": "no"})
    await bot.idle()
    events = [e.event for e in await rows(bot.countersign.db)]
    assert events == ["propose", "propose", "edit", "approve", "start", "succeed", "decline"]


async def rows(db: Database) -> list[AuditEntry]:
    async with db.transaction() as session:
        return list((await session.scalars(select(AuditEntry).order_by(AuditEntry.seq))).all())


def audit_cli(
    command: str, url: str, tmp_path: Path, **env: str
) -> subprocess.CompletedProcess[str]:
    values = clean_env(**{"SLACK_BOT_TOKEN": "xoxb-1", "OPENAI_API_KEY": "k", **env})
    values["DATABASE_URL"] = url
    return run_cli(["audit", command], values, tmp_path)


async def cut_the_end(db: Database, keep: int) -> None:
    """What someone hiding the newest rows would do: delete them and move the head back."""
    kept = (await rows(db))[keep - 1]
    async with db.transaction() as session:
        await session.execute(delete(AuditEntry).where(AuditEntry.seq > keep))
        await session.execute(
            update(AuditChainHead)
            .where(AuditChainHead.team_id == TEAM_ID)
            .values(seq=keep, head_hash=kept.row_hash)
        )


async def test_real_approvals_make_a_chain_that_verifies(
    chain_bot: RunningBot,
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    migrated_database_url: str,
    tmp_path: Path,
) -> None:
    await build_chain(chain_bot, fake_slack, fake_model)
    chain = await rows(chain_bot.countersign.db)
    assert [r.seq for r in chain] == list(range(1, 8))
    assert {r.team_id for r in chain} == {TEAM_ID}
    assert all(r.prev_hash == p.row_hash for p, r in pairwise(chain))
    edit = chain[2].detail or {}
    assert (edit["before"]["title"], edit["after"]["title"]) == ("Fix login bug", "Fix SSO")
    result = audit_cli("verify", migrated_database_url, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "OK: the audit chain holds: 7 audit row(s)" in result.stdout
    assert "AUDIT_SIGNING_KEY is not set" in result.stdout
    values = clean_env(
        SLACK_BOT_TOKEN="xoxb-1", OPENAI_API_KEY="k", DATABASE_URL=migrated_database_url
    )
    exported = run_cli(["audit", "export", "--format", "jsonl"], values, tmp_path)
    events = [e for line in exported.stdout.splitlines() for e in json.loads(line)["events"]]
    assert sorted((e["seq"], e["hash"]) for e in events) == [(r.seq, r.row_hash) for r in chain]
    written = audit_cli("checkpoint", migrated_database_url, tmp_path, AUDIT_SIGNING_KEY=KEY)
    assert written.returncode == 0, written.stderr
    assert f"checkpoint of workspace {TEAM_ID}: 7 rows, head {chain[-1].row_hash}" in (
        written.stdout
    )
    async with chain_bot.countersign.db.transaction() as session:
        (checkpoint,) = (await session.scalars(select(AuditCheckpoint))).all()
    assert (checkpoint.rows, checkpoint.head_hash) == (7, chain[-1].row_hash)
    assert checkpoint.signature is not None
    checked = audit_cli("verify", migrated_database_url, tmp_path, AUDIT_SIGNING_KEY=KEY)
    assert checked.returncode == 0, checked.stdout
    assert "1 checkpoint(s) checked" in checked.stdout


async def _edit_actor(db: Database, chain: list[AuditEntry]) -> None:
    async with db.transaction() as session:
        await session.execute(
            update(AuditEntry).where(AuditEntry.id == chain[3].id).values(actor="UMALLORY")
        )


async def _edit_detail(db: Database, chain: list[AuditEntry]) -> None:
    detail = dict(chain[3].detail or {})
    detail["approvers"] = ["UMALLORY"]
    async with db.transaction() as session:
        await session.execute(
            update(AuditEntry).where(AuditEntry.id == chain[3].id).values(detail=detail)
        )


async def _delete(db: Database, chain: list[AuditEntry]) -> None:
    async with db.transaction() as session:
        await session.execute(delete(AuditEntry).where(AuditEntry.id == chain[3].id))


SWAPPED = ("proposal_id", "from_state", "to_state", "event", "actor", "detail", "created_at")
HASHES = ("detail_hash", "content_hash", "prev_hash", "row_hash")


async def _swap(db: Database, chain: list[AuditEntry]) -> None:
    """Rows 4 and 5 trade places: every column but the id and the position, hashes too."""
    a, b = chain[3], chain[4]
    columns = SWAPPED + HASHES
    async with db.transaction() as session:
        for row, other in ((a, b), (b, a)):
            values: dict[str, Any] = {c: getattr(other, c) for c in columns}
            await session.execute(update(AuditEntry).where(AuditEntry.id == row.id).values(values))


@pytest.mark.parametrize(
    ("tamper", "named"),
    [
        (_edit_actor, "seq 4: edited: its content"),
        (_edit_detail, "seq 4: edited: its detail"),
        (_delete, "seq 4: missing (deleted): the next row present is id"),
        (_swap, "seq 4: out of place"),
    ],
    ids=["edited-row", "edited-detail", "deleted-row", "reordered-rows"],
)
async def test_verify_names_the_first_bad_row(
    chain_bot: RunningBot,
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    migrated_database_url: str,
    tmp_path: Path,
    tamper: Any,
    named: str,
) -> None:
    await build_chain(chain_bot, fake_slack, fake_model)
    db = chain_bot.countersign.db
    chain = await rows(db)
    await tamper(db, chain)
    result = audit_cli("verify", migrated_database_url, tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    first = next(line for line in result.stdout.splitlines() if "first bad row" in line)
    assert named in first
    assert f"workspace {TEAM_ID}" in first
    if tamper is not _delete:
        assert f"row id {chain[3].id}, seq 4" in first


async def test_retention_and_forget_keep_the_chain_verifiable(
    chain_bot: RunningBot,
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    migrated_database_url: str,
    tmp_path: Path,
) -> None:
    await build_chain(chain_bot, fake_slack, fake_model)
    db = chain_bot.countersign.db
    await propose_create(chain_bot, fake_slack, fake_model, user="UBOB")  # still waiting
    await forget_user(db, TEAM_ID, "UALICE")
    removed = await purge(db, timedelta(0))  # Bob's conversation: its proposal expires first
    assert removed.proposals_redacted == 1
    chain = await rows(db)
    assert [r.event for r in chain[-2:]] == ["propose", "expire"]
    assert all(r.detail == {"redacted": True} for r in chain)
    result = audit_cli("verify", migrated_database_url, tmp_path)
    assert result.returncode == 0, result.stdout
    assert "9 audit row(s) (9 with a redacted detail)" in result.stdout
    # What a redacted row still says is still covered by its hash.
    async with db.transaction() as session:
        await session.execute(
            update(AuditEntry).where(AuditEntry.id == chain[1].id).values(event="decline")
        )
    result = audit_cli("verify", migrated_database_url, tmp_path)
    assert result.returncode == 1
    assert f"row id {chain[1].id}, seq 2: edited" in result.stdout


async def test_concurrent_transitions_from_two_engines_make_one_linear_chain(
    migrated_database_url: str,
) -> None:
    first, second = (
        Database.from_url(migrated_database_url),
        Database.from_url(migrated_database_url),
    )
    try:
        await upgrade_to_head(first)
        async with first.transaction() as session:
            proposal = new_proposal("TRACE", "k")
            session.add(proposal)
        ledgers = [Ledger(first), Ledger(second)]
        await asyncio.gather(
            *(
                ledgers[n % 2].audit_only(proposal.id, "refused", f"U{n}", {"n": n})
                for n in range(40)
            )
        )
        chain = await rows(first)
        assert [r.seq for r in chain] == list(range(1, 41))
        assert sorted(int((r.detail or {})["n"]) for r in chain) == list(range(40))
        report = await verify(first, None)
        assert report.ok, report.problems
        assert report.rows == 40
    finally:
        await first.dispose()
        await second.dispose()


def new_proposal(team_id: str, key: str) -> Proposal:
    return Proposal(
        team_id=team_id,
        tool_call_id="c",
        tool_name="create_task",
        arguments={},
        arguments_hash="h",
        description="d",
        preview=[],
        requester="UALICE",
        idempotency_key=key,
        state=ProposalState.PROPOSED,
        expires_at=utcnow(),
        channel_id="C1",
    )


async def test_the_migration_chains_the_rows_written_before_it(database_url: str) -> None:
    db = Database.from_url(database_url)

    def to(revision: str) -> Callable[[Connection], None]:
        return lambda c: command.upgrade(alembic_config(c), revision)

    try:
        async with db.engine.begin() as connection:
            await connection.run_sync(to("0013"))
        async with db.engine.begin() as connection:
            # The rows as that schema had them (today's model has columns added since).
            ids = []
            for team, key in (("TONE", "k1"), ("TTWO", "k2")):
                ids.append(
                    await connection.scalar(
                        text(
                            "INSERT INTO proposals (team_id, tool_call_id, tool_name, arguments, "
                            "arguments_hash, description, preview, requester, idempotency_key, "
                            "state, version, revision, expires_at, channel_id, attempts, "
                            "created_at, updated_at) VALUES (:team, 'c', 'create_task', '{}', "
                            "'h', 'd', '[]', 'UALICE', :key, 'proposed', 1, 1, "
                            "CURRENT_TIMESTAMP, 'C1', 0, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP) "
                            "RETURNING id"
                        ),
                        {"team": team, "key": key},
                    )
                )
        first_id, second_id = ids
        async with db.engine.begin() as connection:
            for pid, event, detail in (
                (first_id, "propose", '{"arguments": {"title": "é"}, "revision": 1}'),
                (second_id, "propose", None),
                (first_id, "approve", '{"approvers": ["UBOB"]}'),
                (second_id, "decline", '{"reason": "no"}'),
                (first_id, "start", "{}"),
            ):
                await connection.execute(
                    text(
                        "INSERT INTO audit_log (proposal_id, from_state, to_state, event, actor, "
                        "detail, created_at) VALUES (:pid, NULL, 'proposed', :event, 'UALICE', "
                        ":detail, CURRENT_TIMESTAMP)"
                    ),
                    {"pid": pid, "event": event, "detail": detail},
                )
            await connection.run_sync(to("head"))
        chain = await rows(db)
        assert sorted((r.team_id, r.seq, r.event) for r in chain) == [
            ("TONE", 1, "propose"),
            ("TONE", 2, "approve"),
            ("TONE", 3, "start"),
            ("TTWO", 1, "propose"),
            ("TTWO", 2, "decline"),
        ]
        report = await verify(db, None)
        assert report.ok, report.problems
        assert report.rows == 5
        await Ledger(db).audit_only(first_id, "refused", "UMALLORY", {"action": "approve"})
        report = await verify(db, None)
        assert report.ok, report.problems
        assert [r.seq for r in await rows(db) if r.team_id == "TONE"] == [1, 2, 3, 4]
    finally:
        await db.dispose()


async def test_a_transaction_moving_many_proposals_races_single_decisions_without_deadlock(
    migrated_database_url: str,
) -> None:
    """Forgetting expires every waiting proposal of a conversation in one transaction while
    people decide them one by one on another replica: both take the chain's lock before any
    proposal's, so neither waits for the other in a loop (PostgreSQL would abort one)."""
    first, second = (
        Database.from_url(migrated_database_url),
        Database.from_url(migrated_database_url),
    )
    try:
        await upgrade_to_head(first)
        async with first.transaction() as session:
            made = [new_proposal("TRACE", f"k{n}") for n in range(20)]
            for proposal in made:
                proposal.expires_at = utcnow() + timedelta(hours=1)
            session.add_all(made)
        ids = [p.id for p in made]
        forgetting, deciding = ApprovalsService(first), ApprovalsService(second)

        async def expire_all() -> None:
            async with first.transaction() as session:
                waiting = (await session.scalars(select(Proposal).order_by(Proposal.id))).all()
                for proposal in waiting:
                    with contextlib.suppress(AlreadyHandled):
                        await forgetting.apply_in(session, proposal, Event.EXPIRE, "forgotten")
                    await asyncio.sleep(0)

        async def decline(proposal_id: int) -> None:
            with contextlib.suppress(AlreadyHandled):
                await deciding.decline(proposal_id, "UBOB", "no")

        await asyncio.wait_for(
            asyncio.gather(expire_all(), *(decline(pid) for pid in reversed(ids))), 60
        )
        chain = await rows(first)
        assert [r.seq for r in chain] == list(range(1, 21))
        assert sorted(r.proposal_id for r in chain) == ids  # each moved exactly once
        assert {r.event for r in chain} <= {"expire", "decline"}
        report = await verify(first, None)
        assert report.ok, report.problems
    finally:
        await first.dispose()
        await second.dispose()
