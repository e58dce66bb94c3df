"""Read queries behind /history, /approvals and the App Home. Every query is scoped to one
person: a conversation is visible to those who started it or wrote in it, never to others."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Generic, TypeVar

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from bot.db.models import (
    Conversation,
    Message,
    Participant,
    Proposal,
    Role,
)

PAGE_SIZE = 10


@dataclass(frozen=True)
class ConversationRow:
    id: int
    channel_id: str
    thread_ts: str
    started_by: str
    created_at: datetime
    updated_at: datetime
    message_count: int
    tokens: int
    proposals: int
    title: str | None = None
    reply_ts: str | None = None  # the bot's latest answer in it: where a link opens the thread


T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    rows: list[T]
    page: int
    has_next: bool


async def my_conversations(
    session: AsyncSession, team_id: str, user: str, page: int = 0
) -> Page[ConversationRow]:
    found = (
        (
            await session.execute(
                select(Conversation)
                .join(Participant, Participant.conversation_id == Conversation.id)
                .where(Participant.user_id == user, Conversation.team_id == team_id)
                .order_by(Conversation.updated_at.desc(), Conversation.id.desc())
                .offset(page * PAGE_SIZE)
                .limit(PAGE_SIZE + 1)
            )
        )
        .scalars()
        .all()
    )
    has_next = len(found) > PAGE_SIZE
    found = found[:PAGE_SIZE]
    counts: dict[int, int] = {}
    if found:
        grouped = await session.execute(
            select(Proposal.conversation_id, func.count())
            .where(Proposal.conversation_id.in_([c.id for c in found]))
            .group_by(Proposal.conversation_id)
        )
        counts = {cid: n for cid, n in grouped.all() if cid is not None}
    replies = await latest_replies(session, [c.id for c in found])
    rows = [
        ConversationRow(
            c.id,
            c.channel_id,
            c.thread_ts,
            c.started_by,
            c.created_at,
            c.updated_at,
            c.message_count,
            c.prompt_tokens + c.completion_tokens,
            counts.get(c.id, 0),
            c.title,
            replies.get(c.id),
        )
        for c in found
    ]
    return Page(rows, page, has_next)


async def latest_replies(session: AsyncSession, conversation_ids: list[int]) -> dict[int, str]:
    """The ts of the bot's latest posted answer in each conversation (ts strings of one
    channel have one width, so the greatest is the latest)."""
    if not conversation_ids:
        return {}
    rows = await session.execute(
        select(Message.conversation_id, func.max(Message.slack_ts))
        .where(
            Message.conversation_id.in_(conversation_ids),
            Message.role == Role.ASSISTANT,
            Message.slack_ts.is_not(None),
        )
        .group_by(Message.conversation_id)
    )
    return {cid: ts for cid, ts in rows.all() if ts}


async def visible_conversation(
    session: AsyncSession, team_id: str, user: str, channel_id: str, ts: str
) -> Conversation | None:
    """The conversation of a thread (or of a message in it), if `user` took part in it."""
    conversation = await session.scalar(
        select(Conversation).where(
            Conversation.team_id == team_id,
            Conversation.channel_id == channel_id,
            Conversation.thread_ts == ts,
        )
    )
    if conversation is None:  # a link to a reply inside the thread
        conversation = await session.scalar(
            select(Conversation)
            .join(Message, Message.conversation_id == Conversation.id)
            .where(
                Conversation.team_id == team_id,
                Conversation.channel_id == channel_id,
                Message.slack_ts == ts,
            )
            .limit(1)
        )
    if conversation is None:
        return None
    member = await session.scalar(
        select(Participant.user_id).where(
            Participant.conversation_id == conversation.id, Participant.user_id == user
        )
    )
    return conversation if member else None


async def visible_conversation_by_id(
    session: AsyncSession, user: str, conversation_id: int
) -> Conversation | None:
    member = await session.scalar(
        select(Participant.user_id).where(
            Participant.conversation_id == conversation_id, Participant.user_id == user
        )
    )
    return await session.get(Conversation, conversation_id) if member else None


async def conversation_messages(
    session: AsyncSession, conversation_id: int, page: int = 0, size: int = 20
) -> Page[Message]:
    found = (
        await session.scalars(
            select(Message)
            .where(Message.conversation_id == conversation_id)
            .order_by(Message.id)
            .offset(page * size)
            .limit(size + 1)
        )
    ).all()
    return Page(list(found[:size]), page, len(found) > size)


async def conversation_proposals(session: AsyncSession, conversation_id: int) -> list[Proposal]:
    return list(
        (
            await session.scalars(
                select(Proposal)
                .where(Proposal.conversation_id == conversation_id)
                .order_by(Proposal.id)
            )
        ).all()
    )


async def visible_message(session: AsyncSession, user: str, message_id: int) -> Message | None:
    message = await session.get(Message, message_id)
    if message is None:
        return None
    member = await session.scalar(
        select(Participant.user_id).where(
            Participant.conversation_id == message.conversation_id, Participant.user_id == user
        )
    )
    if not member or message.id in await private_to_others(session, message.conversation_id, user):
        return None
    return message


async def private_to_others(session: AsyncSession, conversation_id: int, user: str) -> set[int]:
    """Tool work of a conversation (tool calls and their results, system notes: never posted
    in Slack) that somebody else asked for: the tools ran with that person's reach, so what
    they returned is theirs to see. Decided by each message's recorded requester, never by
    its position in the thread; who may read a message's data at all is its audience
    (`bot.membership.Reach.may_read`), which the caller checks as well."""
    rows = (
        await session.execute(
            select(Message.id, Message.role, Message.tool_calls).where(
                Message.conversation_id == conversation_id,
                Message.requester.is_not(None),
                Message.requester != user,
            )
        )
    ).all()
    return {
        message_id
        for message_id, role, tool_calls in rows
        if role in (Role.TOOL, Role.SYSTEM) or (role == Role.ASSISTANT and tool_calls)
    }


@dataclass(frozen=True)
class Hit:
    message: Message
    conversation: Conversation


async def search_my_messages(
    session: AsyncSession, team_id: str, user: str, words: str, limit: int = 10
) -> list[Hit]:
    terms = [w for w in words.split() if w][:8]
    query = (
        select(Message, Conversation)
        .join(Conversation, Conversation.id == Message.conversation_id)
        .where(
            Message.slack_user == user,
            Message.role == Role.USER,
            Conversation.team_id == team_id,
        )
    )
    for term in terms:
        escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        query = query.where(Message.content.ilike(f"%{escaped}%", escape="\\"))
    rows = (await session.execute(query.order_by(Message.id.desc()).limit(limit))).all()
    return [Hit(m, c) for m, c in rows]
