"""spend ledger: each budget's use per window, each model call's reservation, approved raises

Revision ID: 0025
Revises: 0024
Create Date: 2026-11-27 13:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "spend_windows",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("budget", sa.String(length=100), nullable=False),
        sa.Column("window_key", sa.String(length=128), nullable=False),
        sa.Column("used_nano", sa.BigInteger(), nullable=False),
        sa.Column("reserved_nano", sa.BigInteger(), nullable=False),
        sa.Column("used_tokens", sa.BigInteger(), nullable=False),
        sa.Column("reserved_tokens", sa.BigInteger(), nullable=False),
        sa.Column("raised_nano", sa.BigInteger(), nullable=False),
        sa.Column("raised_tokens", sa.BigInteger(), nullable=False),
        sa.Column("soft_noticed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_spend_windows")),
        sa.UniqueConstraint(
            "budget", "window_key", name=op.f("uq_spend_windows_budget_window_key")
        ),
    )
    op.create_table(
        "spend_reservations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("team_id", sa.String(length=32), nullable=False),
        sa.Column("user_id", sa.String(length=32), nullable=False),
        sa.Column("turn_key", sa.String(length=128), nullable=False),
        sa.Column("holds", sa.JSON(), nullable=False),
        sa.Column("estimate_nano", sa.BigInteger(), nullable=False),
        sa.Column("estimate_tokens", sa.BigInteger(), nullable=False),
        sa.Column("prompt_tokens", sa.BigInteger(), nullable=True),
        sa.Column("completion_tokens", sa.BigInteger(), nullable=True),
        sa.Column("charged_nano", sa.BigInteger(), nullable=True),
        sa.Column("charged_from", sa.String(length=16), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("settled_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_spend_reservations")),
    )
    with op.batch_alter_table("spend_reservations", schema=None) as batch_op:
        batch_op.create_index("ix_spend_reservations_state", ["state", "created_at"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_spend_reservations_turn_key"), ["turn_key"], unique=False
        )
    op.create_table(
        "spend_raises",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("budget", sa.String(length=100), nullable=False),
        sa.Column("window_key", sa.String(length=128), nullable=False),
        sa.Column("nano", sa.BigInteger(), nullable=False),
        sa.Column("tokens", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_spend_raises")),
        sa.UniqueConstraint("key", name=op.f("uq_spend_raises_key")),
    )


def downgrade() -> None:
    op.drop_table("spend_raises")
    op.drop_table("spend_reservations")
    op.drop_table("spend_windows")
