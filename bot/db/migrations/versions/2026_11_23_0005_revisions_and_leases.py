"""proposal revisions, leases on the outbox, live replies, wide worker ids

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23 13:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("proposals", schema=None) as batch_op:
        batch_op.add_column(sa.Column("revision", sa.Integer(), nullable=False, server_default="1"))
        batch_op.add_column(sa.Column("revised_by", sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column("approved_revision", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("card_version", sa.Integer(), nullable=True))
        batch_op.alter_column(
            "lease_owner",
            existing_type=sa.String(length=64),
            type_=sa.String(length=255),
            existing_nullable=True,
        )
    with op.batch_alter_table("proposal_approvals", schema=None) as batch_op:
        batch_op.add_column(sa.Column("revision", sa.Integer(), nullable=False, server_default="1"))
        batch_op.add_column(
            sa.Column("arguments_hash", sa.String(length=64), nullable=False, server_default="")
        )
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.alter_column(
            "actor",
            existing_type=sa.String(length=64),
            type_=sa.String(length=255),
            existing_nullable=False,
        )
    with op.batch_alter_table("resume_requests", schema=None) as batch_op:
        batch_op.alter_column(
            "claimed_by",
            existing_type=sa.String(length=64),
            type_=sa.String(length=255),
            existing_nullable=True,
        )
        batch_op.add_column(
            sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True)
        )
        batch_op.add_column(sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"))
        batch_op.create_index(batch_op.f("ix_resume_requests_done_at"), ["done_at"], unique=False)
    op.create_table(
        "live_replies",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("channel_id", sa.String(length=32), nullable=False),
        sa.Column("ts", sa.String(length=32), nullable=False),
        sa.Column("shown", sa.Text(), nullable=False),
        sa.Column("owner", sa.String(length=255), nullable=False),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_live_replies")),
    )
    with op.batch_alter_table("live_replies", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_live_replies_lease_expires_at"), ["lease_expires_at"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("live_replies", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_live_replies_lease_expires_at"))
    op.drop_table("live_replies")
    with op.batch_alter_table("resume_requests", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_resume_requests_done_at"))
        batch_op.drop_column("attempts")
        batch_op.drop_column("lease_expires_at")
    with op.batch_alter_table("proposal_approvals", schema=None) as batch_op:
        batch_op.drop_column("arguments_hash")
        batch_op.drop_column("revision")
    with op.batch_alter_table("proposals", schema=None) as batch_op:
        batch_op.drop_column("card_version")
        batch_op.drop_column("approved_revision")
        batch_op.drop_column("revised_by")
        batch_op.drop_column("revision")
