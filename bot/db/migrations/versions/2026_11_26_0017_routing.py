"""routing to approvers: a copy of the card per approver notified by direct message, and how
far each proposal has climbed its escalation ladder

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-26 00:17:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "card_copies",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("proposal_id", sa.Integer(), nullable=False),
        sa.Column("recipient", sa.String(length=32), nullable=False),
        sa.Column("channel", sa.String(length=32), nullable=False),
        sa.Column("ts", sa.String(length=32), nullable=False),
        sa.Column("reason", sa.String(length=16), nullable=False),
        sa.Column("shown_version", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["proposal_id"],
            ["proposals.id"],
            name=op.f("fk_card_copies_proposal_id_proposals"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_card_copies")),
        sa.UniqueConstraint(
            "proposal_id", "recipient", name=op.f("uq_card_copies_proposal_id_recipient")
        ),
    )
    with op.batch_alter_table("card_copies", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_card_copies_proposal_id"), ["proposal_id"], unique=False
        )
    with op.batch_alter_table("proposals", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("escalation_step", sa.Integer(), nullable=False, server_default="0")
        )


def downgrade() -> None:
    with op.batch_alter_table("proposals", schema=None) as batch_op:
        batch_op.drop_column("escalation_step")
    with op.batch_alter_table("card_copies", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_card_copies_proposal_id"))
    op.drop_table("card_copies")
