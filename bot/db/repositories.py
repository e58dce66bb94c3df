"""Queries. Repositories take a session and never commit: the caller's transaction does."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.db.models import Conversation, Message, Participant, ProcessedEvent, Role, utcnow


def _insert_ignoring_conflicts(session: AsyncSession) -> Any:
    """The database's own INSERT (only its dialect is imported: PostgreSQL's is a start's
    tenth of the SQLAlchemy imports)."""
    if session.get_bind().dialect.name == "postgresql":
        from sqlalchemy.dialects import postgresql

        return postgresql.insert
    from sqlalchemy.dialects import sqlite

    return sqlite.insert


async def record_new_keys(session: AsyncSession, keys: Sequence[str]) -> set[str]:
    """Insert the keys not recorded yet, in one statement; returns those this call inserted."""
    unique = list(dict.fromkeys(keys))
    if not unique:
        return set()
    insert_ = _insert_ignoring_conflicts(session)
    statement = (
        insert_(ProcessedEvent)
        .values([{"key": k, "created_at": utcnow()} for k in unique])
        .on_conflict_do_nothing(index_elements=["key"])
        .returning(ProcessedEvent.key)
    )
    return set((await session.scalars(statement)).all())


async def find_conversation(
    session: AsyncSession, team_id: str, channel_id: str, thread_ts: str
) -> Conversation | None:
    return await session.scalar(
        select(Conversation).where(
            Conversation.team_id == team_id,
            Conversation.channel_id == channel_id,
            Conversation.thread_ts == thread_ts,
        )
    )


async def get_or_create_conversation(
    session: AsyncSession, team_id: str, channel_id: str, thread_ts: str, started_by: str
) -> tuple[Conversation, bool]:
    """The conversation of this thread, creating it if needed; True when it is new.

    Three statements for a new one (find, insert unless another worker just did, its first
    participant), none of them a savepoint: under load every round trip to the database
    counts, and many turns' are written in one transaction (`bot.db.group_commit`)."""
    found = await find_conversation(session, team_id, channel_id, thread_ts)
    if found is not None:
        return found, False
    insert_ = _insert_ignoring_conflicts(session)
    created = await session.scalar(
        insert_(Conversation)
        .values(team_id=team_id, channel_id=channel_id, thread_ts=thread_ts, started_by=started_by)
        .on_conflict_do_nothing(index_elements=["team_id", "channel_id", "thread_ts"])
        .returning(Conversation)
    )
    if created is None:  # another worker created it a moment ago
        found = await find_conversation(session, team_id, channel_id, thread_ts)
        assert found is not None
        return found, False
    session.add(Participant(conversation_id=created.id, user_id=started_by))
    return created, True


async def add_message(
    session: AsyncSession,
    conversation: Conversation,
    role: Role,
    content: str | None,
    *,
    slack_ts: str | None = None,
    slack_user: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    tool_call_id: str | None = None,
    tool_name: str | None = None,
    prompt_tokens: int | None = None,
    completion_tokens: int | None = None,
    cached_tokens: int | None = None,
    model: str | None = None,
    audience: str | None = None,
    source: str | None = None,
) -> Message:
    """Store a message and keep the conversation's counters in step (one atomic UPDATE).
    `audience` and `source` given here are in the INSERT (set later, each is an UPDATE)."""
    message = Message(
        audience=audience,
        source=source,
        conversation_id=conversation.id,
        role=role,
        content=content,
        slack_ts=slack_ts,
        slack_user=slack_user,
        tool_calls=tool_calls,
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cached_tokens=cached_tokens,
        model=model,
    )
    session.add(message)
    await session.flush()
    if role is Role.USER and slack_user:
        await add_participant(session, conversation.id, slack_user)
    await session.execute(
        update(Conversation)
        .where(Conversation.id == conversation.id)
        .values(
            message_count=Conversation.message_count + 1,
            prompt_tokens=Conversation.prompt_tokens + (prompt_tokens or 0),
            completion_tokens=Conversation.completion_tokens + (completion_tokens or 0),
            updated_at=utcnow(),
        )
    )
    return message


async def all_messages(session: AsyncSession, conversation_id: int) -> list[Message]:
    rows = await session.scalars(
        select(Message).where(Message.conversation_id == conversation_id).order_by(Message.id)
    )
    return list(rows.all())


async def last_user(session: AsyncSession, conversation_id: int) -> str | None:
    """Who spoke last in the conversation (the person a resumed turn acts for)."""
    return await session.scalar(
        select(Message.slack_user)
        .where(
            Message.conversation_id == conversation_id,
            Message.role == Role.USER,
            Message.slack_user.is_not(None),
        )
        .order_by(Message.id.desc())
        .limit(1)
    )


async def messages_after(
    session: AsyncSession, conversation_id: int, after_id: int, limit: int
) -> list[Message]:
    """Messages newer than `after_id` (the last summarised one), at most the `limit` newest,
    oldest first."""
    rows = await session.scalars(
        select(Message)
        .where(Message.conversation_id == conversation_id, Message.id > after_id)
        .order_by(Message.id.desc())
        .limit(limit)
    )
    return list(reversed(rows.all()))


async def add_participant(session: AsyncSession, conversation_id: int, user_id: str) -> None:
    insert_ = _insert_ignoring_conflicts(session)
    await session.execute(
        insert_(Participant)
        .values(conversation_id=conversation_id, user_id=user_id)
        .on_conflict_do_nothing(index_elements=["conversation_id", "user_id"])
    )
