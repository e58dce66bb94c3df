"""the audit chain: every audit row carries the hash of its content and of the row before it,
one chain per workspace, with a head row to append under a lock and signed checkpoints;
existing rows are chained in the order they were written

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-26 00:15:00
"""

import hashlib
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

GENESIS = "0" * 64


# A frozen copy of bot.db.audit_chain's hashing, so this migration means the same forever.
def _iso(moment: datetime) -> str:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _backfill() -> None:
    bind = op.get_bind()
    audit = sa.table(
        "audit_log",
        sa.column("id", sa.Integer()),
        sa.column("proposal_id", sa.Integer()),
        sa.column("team_id", sa.String()),
        sa.column("seq", sa.Integer()),
        sa.column("from_state", sa.String()),
        sa.column("to_state", sa.String()),
        sa.column("event", sa.String()),
        sa.column("actor", sa.String()),
        sa.column("detail", sa.JSON()),
        sa.column("created_at", sa.DateTime(timezone=True)),
        sa.column("detail_hash", sa.String()),
        sa.column("content_hash", sa.String()),
        sa.column("prev_hash", sa.String()),
        sa.column("row_hash", sa.String()),
    )
    proposals = sa.table("proposals", sa.column("id", sa.Integer()), sa.column("team_id"))
    heads = sa.table(
        "audit_chain_heads",
        sa.column("team_id", sa.String()),
        sa.column("seq", sa.Integer()),
        sa.column("head_hash", sa.String()),
    )
    rows = bind.execute(
        sa.select(audit, proposals.c.team_id.label("team"))
        .join(proposals, proposals.c.id == audit.c.proposal_id)
        .order_by(audit.c.id)
    ).all()
    chain: dict[str, tuple[int, str]] = {}
    updates: list[dict[str, Any]] = []
    for row in rows:
        seq, prev = chain.get(row.team, (0, GENESIS))
        seq += 1
        detail_hash = _sha(_canonical(row.detail))
        content = _sha(
            _canonical(
                {
                    "team": row.team,
                    "seq": seq,
                    "proposal": row.proposal_id,
                    "from": row.from_state,
                    "to": row.to_state,
                    "event": row.event,
                    "actor": row.actor,
                    "at": _iso(row.created_at),
                    "detail": detail_hash,
                }
            )
        )
        row_hash = _sha(f"{prev}:{content}".encode())
        updates.append(
            {
                "b_id": row.id,
                "b_team": row.team,
                "b_seq": seq,
                "b_detail": detail_hash,
                "b_content": content,
                "b_prev": prev,
                "b_row": row_hash,
            }
        )
        chain[row.team] = (seq, row_hash)
    if updates:
        bind.execute(
            audit.update()
            .where(audit.c.id == sa.bindparam("b_id"))
            .values(
                team_id=sa.bindparam("b_team"),
                seq=sa.bindparam("b_seq"),
                detail_hash=sa.bindparam("b_detail"),
                content_hash=sa.bindparam("b_content"),
                prev_hash=sa.bindparam("b_prev"),
                row_hash=sa.bindparam("b_row"),
            ),
            updates,
        )
    if chain:
        bind.execute(
            heads.insert(),
            [{"team_id": t, "seq": s, "head_hash": h} for t, (s, h) in chain.items()],
        )


def upgrade() -> None:
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.add_column(sa.Column("team_id", sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column("seq", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("detail_hash", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("content_hash", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("prev_hash", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("row_hash", sa.String(length=64), nullable=True))
    op.create_table(
        "audit_chain_heads",
        sa.Column("team_id", sa.String(length=32), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("head_hash", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("team_id", name=op.f("pk_audit_chain_heads")),
    )
    op.create_table(
        "audit_checkpoints",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("team_id", sa.String(length=32), nullable=False),
        sa.Column("rows", sa.Integer(), nullable=False),
        sa.Column("head_hash", sa.String(length=64), nullable=False),
        sa.Column("signature", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_checkpoints")),
    )
    with op.batch_alter_table("audit_checkpoints", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_audit_checkpoints_team_id"), ["team_id"])
    _backfill()
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.create_unique_constraint(
            batch_op.f("uq_audit_log_team_id_seq"), ["team_id", "seq"]
        )


def downgrade() -> None:
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("uq_audit_log_team_id_seq"), type_="unique")
        for column in ("row_hash", "prev_hash", "content_hash", "detail_hash", "seq", "team_id"):
            batch_op.drop_column(column)
    with op.batch_alter_table("audit_checkpoints", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_audit_checkpoints_team_id"))
    op.drop_table("audit_checkpoints")
    op.drop_table("audit_chain_heads")
