"""keyed audit rows: `audit_log.keyed` marks a row whose hash is an HMAC with
AUDIT_SIGNING_KEY; the rows written before it existed are unkeyed (plain hashes) and stay
verifiable as they are

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-27 00:19:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("keyed", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.drop_column("keyed")
