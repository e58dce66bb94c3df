"""usage model: which model answered each assistant message, and how many of its prompt
tokens the server read from its cache (priced at the model's `cached_input`). Older rows
have neither: they are priced at the configured model, as before.

Revision ID: 0026
Revises: 0025
Create Date: 2026-11-27 18:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.add_column(sa.Column("model", sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column("cached_tokens", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_column("cached_tokens")
        batch_op.drop_column("model")
