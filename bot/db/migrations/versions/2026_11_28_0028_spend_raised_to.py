"""spend windows keep an approved raise's amount ("raise to"), not only what it added

Revision ID: 0028
Revises: 0027
Create Date: 2026-11-28 01:40:00

A raise approved "to $24" was stored as what it added to the limit then ($12 over a $12
limit), so a later reload of the policy file stacked on it ($30 + $12 = $42: more than the
approvers or the operator said). The window now keeps the approved amount; its limit is the
higher of that and the file's.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0028"
down_revision: str | None = "0027"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("spend_windows", schema=None) as batch_op:
        batch_op.add_column(sa.Column("raised_to_nano", sa.BigInteger(), nullable=True))
        batch_op.add_column(sa.Column("raised_to_tokens", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("spend_windows", schema=None) as batch_op:
        batch_op.drop_column("raised_to_tokens")
        batch_op.drop_column("raised_to_nano")
