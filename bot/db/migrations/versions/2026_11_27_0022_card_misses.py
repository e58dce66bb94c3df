"""card_misses: who a proposal's card could not reach, kept so the thread is told once per
person however often (and on whichever replica) the card is tried again

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-27 00:21:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "card_misses",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("proposal_id", sa.Integer(), nullable=False),
        sa.Column("recipient", sa.String(length=32), nullable=False),
        sa.Column("reason", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["proposal_id"],
            ["proposals.id"],
            name=op.f("fk_card_misses_proposal_id_proposals"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_card_misses")),
        sa.UniqueConstraint(
            "proposal_id", "recipient", name=op.f("uq_card_misses_proposal_id_recipient")
        ),
    )
    with op.batch_alter_table("card_misses", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_card_misses_proposal_id"), ["proposal_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("card_misses", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_card_misses_proposal_id"))
    op.drop_table("card_misses")
