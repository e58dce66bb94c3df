"""welcomes: the people already welcomed in their DM with the bot (once per person, kept
across restarts and replicas)

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-27 00:20:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "welcomes",
        sa.Column("team_id", sa.String(length=32), nullable=False),
        sa.Column("user_id", sa.String(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("team_id", "user_id", name=op.f("pk_welcomes")),
    )


def downgrade() -> None:
    op.drop_table("welcomes")
