"""The audit log as a hash chain, one per workspace: a row nobody can quietly change.

Each row's content (workspace, position, proposal, states, event, actor, time and the hash of
its detail) is hashed as canonical JSON (sorted keys, no whitespace, UTF-8, times in ISO UTC);
the row's hash is that content hash chained to the previous row's hash. The detail is covered
through its own hash, kept beside it, so retention can replace a detail with the redaction
marker and the row still verifies.

With `AUDIT_SIGNING_KEY` (carried by the session, see `Database`) the chaining is an HMAC with
the key, and the row says so (`keyed`): anyone may recompute plain hashes, nobody without the
key can write a row whose keyed hash verifies. Rows written before the key was set stay plain
and verifiable; `bot.records.audit_walk` holds the rules that keep a plain row from passing
once keyed rows began.

`append` reads the workspace's head and writes the new row in the caller's transaction, under
the head row's lock (`SELECT … FOR UPDATE` on PostgreSQL; SQLite's transactions here begin
IMMEDIATE, one writer at a time): concurrent transitions on several replicas make one linear
chain. Lock order: the head before any proposal row (`lock_head`), everywhere that audits.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from bot.db.models import AuditChainHead, AuditEntry, utcnow
from bot.db.session import AUDIT_KEY

GENESIS = "0" * 64
# What retention leaves of a detail (its hash stays in `detail_hash`).
REDACTED_DETAIL: dict[str, Any] = {"redacted": True}


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def canonical(value: Any) -> bytes:
    """Sorted keys, no whitespace, UTF-8, datetimes as ISO UTC."""

    def other(item: Any) -> Any:
        if isinstance(item, datetime):
            return iso(item)
        raise TypeError(f"{type(item).__name__} is not JSON")

    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=other
    ).encode("utf-8")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def detail_hash(detail: dict[str, Any] | None) -> str:
    return sha256(canonical(detail))


def content_hash(entry: AuditEntry | Any) -> str:
    """The hash of everything the row says (an `AuditEntry`, or a row of the `audit_log`
    table); the detail through `detail_hash`."""
    return sha256(
        canonical(
            {
                "team": entry.team_id,
                "seq": entry.seq,
                "proposal": entry.proposal_id,
                "from": entry.from_state,
                "to": entry.to_state,
                "event": entry.event,
                "actor": entry.actor,
                "at": iso(entry.created_at),
                "detail": entry.detail_hash,
            }
        )
    )


def link(prev_hash: str, content: str, key: str | None = None) -> str:
    """The row's hash: its content chained to the row before; keyed, an HMAC-SHA256 with a
    key derived from `key` for audit rows only (checkpoints are signed with another)."""
    message = f"{prev_hash}:{content}".encode()
    if key is None:
        return sha256(message)
    row_key = hmac.new(key.encode(), b"countersign audit row", hashlib.sha256).digest()
    return hmac.new(row_key, message, hashlib.sha256).hexdigest()


async def lock_head(session: AsyncSession, team_id: str) -> AuditChainHead:
    """The workspace's chain head, locked for this transaction (created at genesis)."""
    query = (
        select(AuditChainHead)
        .where(AuditChainHead.team_id == team_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    head = await session.scalar(query)
    if head is not None:
        return head
    try:
        async with session.begin_nested():
            session.add(AuditChainHead(team_id=team_id, seq=0, head_hash=GENESIS))
    except IntegrityError:
        pass  # another transaction made it first; its row is locked below
    head = await session.scalar(query)
    assert head is not None
    return head


def seal(entry: AuditEntry, prev_hash: str, key: str | None = None) -> None:
    """Fill in the hashes of a row whose content is complete (keyed with `key`, if given)."""
    entry.detail_hash = detail_hash(entry.detail)
    entry.content_hash = content_hash(entry)
    entry.prev_hash = prev_hash
    entry.keyed = key is not None
    entry.row_hash = link(prev_hash, entry.content_hash, key)


async def append(
    session: AsyncSession,
    *,
    team_id: str,
    proposal_id: int,
    from_state: str | None,
    to_state: str | None,
    event: str,
    actor: str,
    detail: dict[str, Any] | None,
) -> AuditEntry:
    """Add the next row of `team_id`'s chain in the caller's transaction, keyed with the
    session's audit key if it has one."""
    head = await lock_head(session, team_id)
    entry = AuditEntry(
        team_id=team_id,
        seq=head.seq + 1,
        proposal_id=proposal_id,
        from_state=from_state,
        to_state=to_state,
        event=event,
        actor=actor,
        detail=detail,
        created_at=utcnow(),
    )
    seal(entry, head.head_hash, session.info.get(AUDIT_KEY))
    session.add(entry)
    head.seq, head.head_hash = head.seq + 1, entry.row_hash or ""
    await session.flush()
    return entry
