"""grants from the card: a requester's later calls of one tool definition, in a thread, a
channel or everywhere, approved by the person who granted it until it expires or is revoked

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-26 00:16:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "grants",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("team_id", sa.String(length=32), nullable=False),
        sa.Column("tool_name", sa.String(length=255), nullable=False),
        sa.Column("definition", sa.String(length=100), nullable=False),
        sa.Column("requester", sa.String(length=32), nullable=False),
        sa.Column("scope", sa.String(length=8), nullable=False),
        sa.Column("channel_id", sa.String(length=32), nullable=True),
        sa.Column("thread_ts", sa.String(length=32), nullable=True),
        sa.Column("granted_by", sa.String(length=32), nullable=False),
        sa.Column("rule", sa.String(length=255), nullable=True),
        sa.Column("proposal_id", sa.Integer(), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_by", sa.String(length=32), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["proposal_id"],
            ["proposals.id"],
            name=op.f("fk_grants_proposal_id_proposals"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_grants")),
    )
    with op.batch_alter_table("grants", schema=None) as batch_op:
        batch_op.create_index("ix_grants_cover", ["team_id", "requester", "tool_name"])
        batch_op.create_index(batch_op.f("ix_grants_proposal_id"), ["proposal_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("grants", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_grants_proposal_id"))
        batch_op.drop_index("ix_grants_cover")
    op.drop_table("grants")
