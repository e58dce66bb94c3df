"""one door: grants bound to the rule (and its content), requirements and audience they were
made under, voided with a reason; every decided revision recorded with its step

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-27 00:18:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("grants") as batch:
        batch.add_column(sa.Column("rule_hash", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("policy_version", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("approvers", sa.JSON(), nullable=True))
        batch.add_column(
            sa.Column("approvals_required", sa.Integer(), nullable=False, server_default="1")
        )
        batch.add_column(
            sa.Column("four_eyes", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch.add_column(sa.Column("audience", sa.Text(), nullable=True))
        batch.add_column(sa.Column("voided_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("void_reason", sa.Text(), nullable=True))
    with op.batch_alter_table("policy_decisions") as batch:
        batch.add_column(
            sa.Column("step", sa.String(length=16), nullable=False, server_default="propose")
        )
        batch.add_column(sa.Column("revision", sa.Integer(), nullable=False, server_default="1"))
        batch.add_column(sa.Column("actor", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("policy_decisions") as batch:
        batch.drop_column("actor")
        batch.drop_column("revision")
        batch.drop_column("step")
    with op.batch_alter_table("grants") as batch:
        for column in (
            "void_reason", "voided_at", "audience", "four_eyes", "approvals_required",
            "approvers", "policy_version", "rule_hash",
        ):  # fmt: skip
            batch.drop_column(column)
