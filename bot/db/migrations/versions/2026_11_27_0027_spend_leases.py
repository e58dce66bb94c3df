"""spend leases: a process's share of a budget window's room, taken from in memory

Revision ID: 0027
Revises: 0026
Create Date: 2026-11-27 19:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0027"
down_revision: str | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("spend_windows", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("leased_nano", sa.BigInteger(), nullable=False, server_default="0")
        )
        batch_op.add_column(
            sa.Column("leased_tokens", sa.BigInteger(), nullable=False, server_default="0")
        )
        batch_op.add_column(sa.Column("reclaim", sa.Integer(), nullable=False, server_default="0"))
    op.create_table(
        "spend_leases",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("window_id", sa.Integer(), nullable=False),
        sa.Column("holder", sa.String(length=64), nullable=False),
        sa.Column("room_nano", sa.BigInteger(), nullable=False),
        sa.Column("room_tokens", sa.BigInteger(), nullable=False),
        sa.Column("renewed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_spend_leases")),
        sa.UniqueConstraint("window_id", "holder", name=op.f("uq_spend_leases_window_id_holder")),
    )
    with op.batch_alter_table("spend_leases", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_spend_leases_window_id"), ["window_id"], unique=False)


def downgrade() -> None:
    op.drop_table("spend_leases")
    with op.batch_alter_table("spend_windows", schema=None) as batch_op:
        batch_op.drop_column("reclaim")
        batch_op.drop_column("leased_tokens")
        batch_op.drop_column("leased_nano")
