"""answer feedback (thumbs up or down per person and answer)

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23 20:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "answer_feedback",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("message_id", sa.Integer(), nullable=False),
        sa.Column("team_id", sa.String(length=32), nullable=False),
        sa.Column("channel_id", sa.String(length=32), nullable=False),
        sa.Column("message_ts", sa.String(length=32), nullable=False),
        sa.Column("user_id", sa.String(length=32), nullable=False),
        sa.Column("value", sa.String(length=8), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["message_id"], ["messages.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("message_id", "user_id"),
    )
    with op.batch_alter_table("answer_feedback", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_answer_feedback_message_id"), ["message_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("answer_feedback", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_answer_feedback_message_id"))
    op.drop_table("answer_feedback")
