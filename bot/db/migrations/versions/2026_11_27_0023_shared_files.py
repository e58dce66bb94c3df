"""shared_files: files shared in Slack threads, each downloaded and read once, with the
audience of the place they were shared in; messages.file_id points a prompt's file message at
its file (an image's part is added from it)

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-27 06:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "shared_files",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("team_id", sa.String(length=32), nullable=False),
        sa.Column("slack_file_id", sa.String(length=32), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("mimetype", sa.String(length=64), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("width", sa.Integer(), nullable=True),
        sa.Column("height", sa.Integer(), nullable=True),
        sa.Column("text", sa.Text(), nullable=True),
        sa.Column("data", sa.LargeBinary(), nullable=True),
        sa.Column("audience", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_shared_files")),
        sa.UniqueConstraint(
            "team_id", "slack_file_id", name=op.f("uq_shared_files_team_id_slack_file_id")
        ),
    )
    with op.batch_alter_table("shared_files", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_shared_files_sha256"), ["sha256"], unique=False)
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.add_column(sa.Column("file_id", sa.Integer(), nullable=True))
        batch_op.create_index(batch_op.f("ix_messages_file_id"), ["file_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_messages_file_id"))
        batch_op.drop_column("file_id")
    with op.batch_alter_table("shared_files", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_shared_files_sha256"))
    op.drop_table("shared_files")
