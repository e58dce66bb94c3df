"""a budget pause keeps when its window resets

Revision ID: 0029
Revises: 0028
Create Date: 2026-11-28 12:00:00

A paused turn is abandoned once its window resets; the pause keeps that time, so a reload that
changes or removes the budget cannot leave a week-old pause resumable.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0029"
down_revision: str | None = "0028"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("budget_pauses", schema=None) as batch_op:
        batch_op.add_column(sa.Column("resets_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("budget_pauses", schema=None) as batch_op:
        batch_op.drop_column("resets_at")
