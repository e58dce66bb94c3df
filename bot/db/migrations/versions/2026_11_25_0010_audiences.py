"""every stored message, summary and proposal carries its audience (who may read it); a
proposal keeps what its turn had read (its provenance)

Existing rows get the audience of the place they were said in: the conversation's channel, or
for a DM the person who started it.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-25 18:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _place(conversation_id: sa.ColumnElement[int]) -> sa.ScalarSelect[str]:
    """The audience of a conversation's channel: `U:<who started it>` in a DM, else
    `C:<channel>`."""
    conversations = sa.table(
        "conversations",
        sa.column("id", sa.Integer),
        sa.column("channel_id", sa.String),
        sa.column("started_by", sa.String),
    )
    place = sa.case(
        (conversations.c.channel_id.like("D%"), "U:" + conversations.c.started_by),
        else_="C:" + conversations.c.channel_id,
    )
    return sa.select(place).where(conversations.c.id == conversation_id).scalar_subquery()


def _backfill_requesters() -> None:
    """Tool work stored before this revision belongs to the person whose message started its
    turn (the last person to write before it): recorded once here, read from the column after."""
    messages = sa.table(
        "messages",
        sa.column("id", sa.Integer),
        sa.column("conversation_id", sa.Integer),
        sa.column("role", sa.String),
        sa.column("slack_user", sa.String),
        sa.column("requester", sa.String),
    )
    bind = op.get_bind()
    rows = bind.execute(
        sa.select(
            messages.c.id, messages.c.conversation_id, messages.c.role, messages.c.slack_user
        ).order_by(messages.c.conversation_id, messages.c.id)
    )
    owners: dict[str, list[int]] = {}
    conversation, asker = None, None
    for message_id, conversation_id, role, slack_user in rows:
        if conversation_id != conversation:
            conversation, asker = conversation_id, None
        if role == "user":
            asker = slack_user
        elif asker:
            owners.setdefault(asker, []).append(message_id)
    for asker, ids in owners.items():
        for at in range(0, len(ids), 500):
            bind.execute(
                messages.update()
                .where(messages.c.id.in_(ids[at : at + 500]))
                .values(requester=asker)
            )


def upgrade() -> None:
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.add_column(sa.Column("audience", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("source", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("requester", sa.String(length=32), nullable=True))
    with op.batch_alter_table("conversation_summaries", schema=None) as batch_op:
        batch_op.add_column(sa.Column("audience", sa.Text(), nullable=True))
    with op.batch_alter_table("proposals", schema=None) as batch_op:
        batch_op.add_column(sa.Column("audience", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("provenance", sa.JSON(), nullable=True))
    for name in ("messages", "conversation_summaries"):
        table = sa.table(name, sa.column("conversation_id", sa.Integer), sa.column("audience"))
        op.execute(
            table.update()
            .where(table.c.audience.is_(None))
            .values(audience=_place(table.c.conversation_id))
        )
    _backfill_requesters()
    proposals = sa.table(
        "proposals",
        sa.column("channel_id", sa.String),
        sa.column("requester", sa.String),
        sa.column("audience"),
    )
    op.execute(
        proposals.update()
        .where(proposals.c.audience.is_(None))
        .values(
            audience=sa.case(
                (proposals.c.channel_id.like("D%"), "U:" + proposals.c.requester),
                else_="C:" + proposals.c.channel_id,
            )
        )
    )


def downgrade() -> None:
    with op.batch_alter_table("proposals", schema=None) as batch_op:
        batch_op.drop_column("provenance")
        batch_op.drop_column("audience")
    with op.batch_alter_table("conversation_summaries", schema=None) as batch_op:
        batch_op.drop_column("audience")
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_column("requester")
        batch_op.drop_column("source")
        batch_op.drop_column("audience")
