"""budget_pauses: turns paused at a budget's limit, their card and how they end

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-27 12:45:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "budget_pauses",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("team_id", sa.String(length=32), nullable=False),
        sa.Column("conversation_id", sa.Integer(), nullable=True),
        sa.Column("requester", sa.String(length=32), nullable=False),
        sa.Column("channel_id", sa.String(length=32), nullable=False),
        sa.Column("thread_ts", sa.String(length=32), nullable=True),
        sa.Column("turn_key", sa.String(length=128), nullable=False),
        sa.Column("budget", sa.String(length=100), nullable=False),
        sa.Column("window_key", sa.String(length=128), nullable=False),
        sa.Column("card_ts", sa.String(length=32), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=True),
        sa.Column("raise_proposal_id", sa.Integer(), nullable=True),
        sa.Column("decided_by", sa.String(length=32), nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("resumed_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name=op.f("fk_budget_pauses_conversation_id_conversations"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["raise_proposal_id"],
            ["proposals.id"],
            name=op.f("fk_budget_pauses_raise_proposal_id_proposals"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_budget_pauses")),
    )
    with op.batch_alter_table("budget_pauses", schema=None) as batch_op:
        batch_op.create_index(
            "ix_budget_pauses_budget", ["budget", "window_key", "state"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_budget_pauses_conversation_id"), ["conversation_id"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_budget_pauses_requester"), ["requester"], unique=False)


def downgrade() -> None:
    op.drop_table("budget_pauses")
