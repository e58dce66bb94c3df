"""Feedback on answers: stored per person and answer, read back for `/history` and the audit
export. A click names a Slack message; only an answer Countersign stored for that channel can
receive feedback, so a crafted payload cannot plant rows."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from bot.db.models import AnswerFeedback, Conversation, Message, Participant, Role, utcnow
from bot.db.session import Database

Value = Literal["good", "bad"]


async def record(
    db: Database, team: str, channel: str, message_ts: str, user: str, value: Value
) -> bool:
    """Store `user`'s feedback on the answer shown as `message_ts`; False if no answer of
    Countersign's is that message, or it is in someone else's DM. (Whether `user` can read a
    channel is checked by the caller, which can ask Slack.)"""
    async with db.transaction() as session:
        found = (
            await session.execute(
                select(Message.id, Message.conversation_id)
                .join(Conversation, Conversation.id == Message.conversation_id)
                .where(
                    Conversation.team_id == team,
                    Conversation.channel_id == channel,
                    Message.slack_ts == message_ts,
                    Message.role == Role.ASSISTANT,
                )
                .limit(1)
            )
        ).first()
        if found is None:
            return False
        message_id, conversation_id = found
        if channel.startswith("D"):  # a DM: only the person in it
            took_part = await session.get(Participant, (conversation_id, user))
            if took_part is None:
                return False
        if await _replace(session, message_id, user, value):
            return True
        try:
            async with session.begin_nested():
                session.add(
                    AnswerFeedback(
                        message_id=message_id,
                        team_id=team,
                        channel_id=channel,
                        message_ts=message_ts,
                        user_id=user,
                        value=value,
                    )
                )
        except IntegrityError:  # the same person's other click won the race: take this one
            await _replace(session, message_id, user, value)
        return True


async def _replace(session: AsyncSession, message_id: int, user: str, value: Value) -> bool:
    """Change `user`'s feedback on the message; False if they had given none."""
    changed = await session.execute(
        update(AnswerFeedback)
        .where(AnswerFeedback.message_id == message_id, AnswerFeedback.user_id == user)
        .values(value=value, updated_at=utcnow())
    )
    return bool(getattr(changed, "rowcount", 0))


async def tallies(session: AsyncSession, message_ids: list[int]) -> dict[int, dict[str, int]]:
    """Per message: how many people found it good and how many bad."""
    if not message_ids:
        return {}
    rows = await session.execute(
        select(AnswerFeedback.message_id, AnswerFeedback.value, func.count())
        .where(AnswerFeedback.message_id.in_(message_ids))
        .group_by(AnswerFeedback.message_id, AnswerFeedback.value)
    )
    out: dict[int, dict[str, int]] = {}
    for message_id, value, count in rows.all():
        out.setdefault(message_id, {})[value] = count
    return out


FEEDBACK_COLUMNS = [
    "feedback_id",
    "at",
    "user",
    "value",
    "channel",
    "message_ts",
    "conversation_id",
]


async def feedback_rows(db: Database, batch: int = 500) -> AsyncIterator[dict[str, Any]]:
    last_id = 0
    while True:
        async with db.reading() as session:  # a read: it never waits for the bot's writes
            rows = (
                await session.execute(
                    select(AnswerFeedback, Message.conversation_id)
                    .join(Message, Message.id == AnswerFeedback.message_id)
                    .where(AnswerFeedback.id > last_id)
                    .order_by(AnswerFeedback.id)
                    .limit(batch)
                )
            ).all()
        if not rows:
            return
        for feedback, conversation_id in rows:
            yield {
                "feedback_id": feedback.id,
                "at": feedback.updated_at.isoformat(),
                "user": feedback.user_id,
                "value": feedback.value,
                "channel": feedback.channel_id,
                "message_ts": feedback.message_ts,
                "conversation_id": conversation_id,
            }
        last_id = rows[-1][0].id
