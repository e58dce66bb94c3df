"""Checkpoints of the audit chain: what they catch (truncation, a rewritten chain), their
signatures, the schedule that writes and posts them to Slack, and `audit checkpoint`."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
from collections.abc import AsyncIterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy import delete, select

from bot.approvals.ledger import Ledger
from bot.config import load_settings
from bot.db.audit_chain import canonical, iso, seal
from bot.db.migrate import upgrade_to_head
from bot.db.models import (
    AuditChainHead,
    AuditCheckpoint,
    AuditEntry,
)
from bot.db.session import Database
from bot.records.audit_checkpoints import CheckpointJob, signed_correctly, stored_checkpoints
from bot.slack.audit_checkpoints import posted_checkpoints, poster
from tests.fakes.openai import FakeOpenAI
from tests.fakes.slack import BOT_TOKEN, TEAM_ID, FakeSlack, wait_until
from tests.harness import RunningBot, clean_env, make_settings, run_cli, start_bot, stop_bot
from tests.test_audit_chain import KEY, audit_cli, build_chain, cut_the_end, new_proposal, rows


@pytest.fixture
async def chain_bot(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, migrated_database_url: str
) -> AsyncIterator[RunningBot]:
    running = await start_bot(
        make_settings(fake_slack, fake_model, migrated_database_url, streaming="auto")
    )
    yield running
    await stop_bot(running)


async def test_truncation_is_caught_by_the_checkpoint_and_a_forged_one_by_its_signature(
    chain_bot: RunningBot,
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    migrated_database_url: str,
    tmp_path: Path,
) -> None:
    await build_chain(chain_bot, fake_slack, fake_model)
    db = chain_bot.countersign.db
    assert (
        audit_cli("checkpoint", migrated_database_url, tmp_path, AUDIT_SIGNING_KEY=KEY).returncode
        == 0
    )
    await cut_the_end(db, keep=5)  # the chain itself is consistent again
    result = audit_cli("verify", migrated_database_url, tmp_path, AUDIT_SIGNING_KEY=KEY)
    assert result.returncode == 1, result.stdout
    first = next(line for line in result.stdout.splitlines() if "first bad row" in line)
    assert "seq 6: missing (truncated): checkpoint database #1" in first
    assert "recorded 7 rows, the chain has 5" in first
    # Rewriting the checkpoint to the shorter chain needs the key: without it, a forgery.
    head = (await rows(db))[-1]
    async with db.transaction() as session:
        checkpoint = (await session.scalars(select(AuditCheckpoint))).one()
        message = canonical(
            {"team": TEAM_ID, "rows": 5, "head": head.row_hash, "at": iso(checkpoint.created_at)}
        )
        checkpoint.rows, checkpoint.head_hash = 5, head.row_hash or ""
        checkpoint.signature = hmac.new(b"a guess", message, hashlib.sha256).hexdigest()
    result = audit_cli("verify", migrated_database_url, tmp_path, AUDIT_SIGNING_KEY=KEY)
    assert result.returncode == 1, result.stdout
    first = next(line for line in result.stdout.splitlines() if "first bad row" in line)
    assert "checkpoint database #1 has a bad signature" in first
    # With the right key the rewrite would pass: the signature is what stopped it.
    async with db.transaction() as session:
        checkpoint = (await session.scalars(select(AuditCheckpoint))).one()
        checkpoint.signature = hmac.new(KEY.encode(), message, hashlib.sha256).hexdigest()
    assert (
        audit_cli("verify", migrated_database_url, tmp_path, AUDIT_SIGNING_KEY=KEY).returncode == 0
    )
    # With the key set, an unsigned checkpoint is not trusted (nor does it raise an alarm).
    async with db.transaction() as session:
        session.add(AuditCheckpoint(team_id=TEAM_ID, rows=99, head_hash="0" * 64))
    result = audit_cli("verify", migrated_database_url, tmp_path, AUDIT_SIGNING_KEY=KEY)
    assert result.returncode == 0, result.stdout
    assert "checkpoint database #2 is unsigned: not trusted" in result.stdout
    assert (
        audit_cli("verify", migrated_database_url, tmp_path).returncode == 1
    )  # without the key: used


async def test_the_checkpoint_job_posts_on_schedule_and_verify_reads_slack_back(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, tmp_path: Path
) -> None:
    bot = await start_bot(
        make_settings(
            fake_slack,
            fake_model,
            sqlite_url,
            audit_checkpoint_every=1,
            audit_checkpoint_channel="CAUDIT",
            audit_signing_key=KEY,
            sweep_interval_seconds=0.1,
            streaming="auto",
        )
    )
    try:
        await build_chain(bot, fake_slack, fake_model)
        head = (await rows(bot.countersign.db))[-1]

        def posted() -> list[dict[str, Any]]:
            return [
                (m.metadata or {}).get("event_payload") or {}
                for m in fake_slack.bot_messages("CAUDIT")
            ]

        await wait_until(lambda: any(p.get("rows") == 7 for p in posted()), timeout=10)
        latest = posted()[-1]
        assert (latest["team"], latest["rows"], latest["head"]) == (TEAM_ID, 7, head.row_hash)
        assert len(str(latest["signature"])) == 64
        assert str(head.row_hash) in fake_slack.bot_messages("CAUDIT")[-1].text
        count = len(posted())
        await asyncio.sleep(1.5)
        assert len(posted()) == count  # nothing new, nothing posted again
    finally:
        await stop_bot(bot)
    env = {
        "AUDIT_SIGNING_KEY": KEY,
        "AUDIT_CHECKPOINT_CHANNEL": "CAUDIT",
        "SLACK_API_URL": fake_slack.api_url,
        "SLACK_BOT_TOKEN": BOT_TOKEN,
    }
    result = audit_cli("verify", sqlite_url, tmp_path, **env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert fake_slack.calls_to("conversations.history")
    written = audit_cli("checkpoint", sqlite_url, tmp_path, **env)
    assert written.returncode == 0, written.stderr
    assert "posted to CAUDIT" in written.stdout
    assert posted()[-1]["rows"] == 7
    assert len(posted()) == count + 1
    # Someone removes the newest rows and every checkpoint in the database: Slack's remain.
    db = Database.from_url(sqlite_url)
    try:
        await cut_the_end(db, keep=5)
        async with db.transaction() as session:
            await session.execute(delete(AuditCheckpoint))
    finally:
        await db.dispose()
    result = audit_cli("verify", sqlite_url, tmp_path, **env)
    assert result.returncode == 1, result.stdout
    first = next(line for line in result.stdout.splitlines() if "first bad row" in line)
    assert "seq 6: missing (truncated): checkpoint Slack CAUDIT" in first


async def test_a_rewritten_chain_is_caught_by_the_checkpoint(
    chain_bot: RunningBot,
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    migrated_database_url: str,
    tmp_path: Path,
) -> None:
    """The chain has no secret: someone may change a row and recompute every hash after it.
    The checkpoint written before still holds the old head."""
    await build_chain(chain_bot, fake_slack, fake_model)
    db = chain_bot.countersign.db
    assert audit_cli("checkpoint", migrated_database_url, tmp_path).returncode == 0
    async with db.transaction() as session:
        chain = list((await session.scalars(select(AuditEntry).order_by(AuditEntry.seq))).all())
        chain[3].actor = "UMALLORY"
        for before, row in pairwise(chain):
            seal(row, before.row_hash or "")
        head = await session.get(AuditChainHead, TEAM_ID)
        assert head is not None
        head.head_hash = chain[-1].row_hash or ""
    result = audit_cli("verify", migrated_database_url, tmp_path)
    assert result.returncode == 1, result.stdout
    first = next(line for line in result.stdout.splitlines() if "first bad row" in line)
    assert "seq 7: the chain up to here differs from checkpoint database #1" in first


@pytest.mark.parametrize(
    ("raw", "seconds"), [("1h", 3600), ("30s", 30), ("15m", 900), ("2d", 172_800), ("90", 90)]
)
def test_the_checkpoint_schedule_takes_durations(
    monkeypatch: pytest.MonkeyPatch, raw: str, seconds: float
) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-1")
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("AUDIT_CHECKPOINT_EVERY", raw)
    assert load_settings(_env_file=None).audit_checkpoint_every == seconds


def test_a_bad_checkpoint_schedule_is_named(tmp_path: Path) -> None:
    env = clean_env(SLACK_BOT_TOKEN="xoxb-1", OPENAI_API_KEY="k", AUDIT_CHECKPOINT_EVERY="soon")
    result = run_cli(["audit", "verify"], env, tmp_path)
    assert result.returncode == 2
    assert "AUDIT_CHECKPOINT_EVERY" in result.stderr
    assert "30s, 15m, 1h or 1d" in result.stderr
    assert (
        load_settings(
            _env_file=None, slack_bot_token="xoxb-1", openai_api_key="k"
        ).audit_checkpoint_every
        == 3600
    )


async def test_a_checkpoint_slack_refused_is_posted_on_the_next_run(
    fake_slack: FakeSlack, sqlite_url: str
) -> None:
    db = Database.from_url(sqlite_url)
    try:
        await upgrade_to_head(db)
        async with db.transaction() as session:
            proposal = new_proposal(TEAM_ID, "k")
            session.add(proposal)
        await Ledger(db).audit_only(proposal.id, "refused", "UMALLORY", {"action": "approve"})
        client = AsyncWebClient(token=BOT_TOKEN, base_url=fake_slack.api_url)
        job = CheckpointJob(db, KEY, 0, poster(client, "CAUDIT"))
        fake_slack.fail_methods["chat.postMessage"] = "internal_error"
        await job()
        assert fake_slack.bot_messages("CAUDIT") == []
        assert len(await stored_checkpoints(db)) == 1  # stored all the same
        del fake_slack.fail_methods["chat.postMessage"]
        await job()  # the chain did not grow: nothing new, the refused one goes now
        (message,) = fake_slack.bot_messages("CAUDIT")
        assert (message.metadata or {})["event_payload"]["rows"] == 1
        assert len(await stored_checkpoints(db)) == 1
        (read,) = await posted_checkpoints(client, "CAUDIT")
        assert read.signature is not None
        assert signed_correctly(KEY, read)
    finally:
        await db.dispose()
