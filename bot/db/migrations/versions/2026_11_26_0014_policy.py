"""the policy file: each proposal keeps the decision that made it, and every decision (deny
included) is recorded for counts and replay

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-26 03:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("proposals", schema=None) as batch_op:
        batch_op.add_column(sa.Column("policy", sa.JSON(), nullable=True))
    op.create_table(
        "policy_decisions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("team_id", sa.String(length=32), nullable=False),
        sa.Column("channel_id", sa.String(length=32), nullable=False),
        sa.Column("thread_ts", sa.String(length=32), nullable=True),
        sa.Column("requester", sa.String(length=32), nullable=False),
        sa.Column("tool_name", sa.String(length=255), nullable=False),
        sa.Column("pack", sa.String(length=255), nullable=False),
        sa.Column("arguments", sa.JSON(), nullable=False),
        sa.Column("groups", sa.JSON(), nullable=False),
        sa.Column("calls_in_thread", sa.Integer(), nullable=False),
        sa.Column("calls_today", sa.Integer(), nullable=False),
        sa.Column("outcome", sa.String(length=8), nullable=False),
        sa.Column("rule", sa.String(length=255), nullable=True),
        sa.Column("policy_version", sa.String(length=64), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("shadow", sa.JSON(), nullable=True),
        sa.Column("proposal_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["proposal_id"],
            ["proposals.id"],
            name=op.f("fk_policy_decisions_proposal_id_proposals"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_policy_decisions")),
    )
    with op.batch_alter_table("policy_decisions", schema=None) as batch_op:
        batch_op.create_index(
            "ix_policy_decisions_thread", ["channel_id", "thread_ts", "tool_name"], unique=False
        )
        batch_op.create_index(
            "ix_policy_decisions_requester",
            ["requester", "tool_name", "created_at"],
            unique=False,
        )
        batch_op.create_index(
            batch_op.f("ix_policy_decisions_proposal_id"), ["proposal_id"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_policy_decisions_created_at"), ["created_at"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("policy_decisions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_policy_decisions_created_at"))
        batch_op.drop_index(batch_op.f("ix_policy_decisions_proposal_id"))
        batch_op.drop_index("ix_policy_decisions_requester")
        batch_op.drop_index("ix_policy_decisions_thread")
    op.drop_table("policy_decisions")
    with op.batch_alter_table("proposals", schema=None) as batch_op:
        batch_op.drop_column("policy")
