"""conversation titles: `conversations.title`, a short name from the first request shown in
the App Home, /history and /approvals (NULL for conversations from before: they show where
they took place instead)

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-27 03:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.add_column(sa.Column("title", sa.String(length=200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.drop_column("title")
