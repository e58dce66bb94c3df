"""the Stop journal: a Stop is recorded before it cancels anything and marked done once its
proposals are withdrawn, so recovery completes a Stop cut off by a crash

Revision ID: 0013
Revises: 0010
Create Date: 2026-11-25 18:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "stop_journal",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("team_id", sa.String(length=32), nullable=False),
        sa.Column("channel_id", sa.String(length=32), nullable=False),
        sa.Column("thread_ts", sa.String(length=32), nullable=False),
        sa.Column("user_id", sa.String(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("done_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("stop_journal", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_stop_journal_done_at"), ["done_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("stop_journal", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_stop_journal_done_at"))
    op.drop_table("stop_journal")
