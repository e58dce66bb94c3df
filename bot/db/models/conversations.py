"""Conversations as the model sees them, who took part, and replies being written."""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Enum,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from bot.db.models.base import Base, UTCDateTime, utcnow


class Role(enum.StrEnum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class Conversation(Base):
    """One thread (or a DM's main timeline) the bot takes part in."""

    __tablename__ = "conversations"
    __table_args__ = (UniqueConstraint("team_id", "channel_id", "thread_ts"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    team_id: Mapped[str] = mapped_column(String(32))
    channel_id: Mapped[str] = mapped_column(String(32))
    # The root ts of the thread; "" for a DM's main timeline.
    thread_ts: Mapped[str] = mapped_column(String(32))
    started_by: Mapped[str] = mapped_column(String(32), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, index=True)
    message_count: Mapped[int] = mapped_column(Integer, default=0)
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    # A short title from the first request (a model's, else its first words): plain text,
    # escaped where it is shown; None until the first answered turn names it.
    title: Mapped[str | None] = mapped_column(String(200))


class Message(Base):
    """One message of a conversation, in the shape the model sees it."""

    __tablename__ = "messages"
    __table_args__ = (
        Index("ix_messages_conversation_id_id", "conversation_id", "id"),
        Index("ix_messages_conversation_id_slack_ts", "conversation_id", "slack_ts"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    conversation_id: Mapped[int] = mapped_column(ForeignKey("conversations.id", ondelete="CASCADE"))
    role: Mapped[Role] = mapped_column(
        Enum(Role, native_enum=False, length=16, values_callable=lambda e: [m.value for m in e])
    )
    content: Mapped[str | None] = mapped_column(Text)
    tool_calls: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON)
    tool_call_id: Mapped[str | None] = mapped_column(String(128))
    tool_name: Mapped[str | None] = mapped_column(String(128))
    slack_ts: Mapped[str | None] = mapped_column(String(32))
    slack_user: Mapped[str | None] = mapped_column(String(32), index=True)
    # Who may read it (`bot.audience`): `C:<channel>` members of a channel, `U:<user>` one
    # person, several clauses all at once; "" anyone in the workspace.
    audience: Mapped[str | None] = mapped_column(Text)
    # A read tool's result: what was read ("get_recent_messages #exec, by @alice"), for the
    # provenance line of a card proposed after it.
    source: Mapped[str | None] = mapped_column(Text)
    # The tool work of a turn (tool calls, results, notes) is its requester's: who asked for it.
    requester: Mapped[str | None] = mapped_column(String(32))
    # A file shared in the thread (`shared_files.id`): an image's part is added from it.
    file_id: Mapped[int | None] = mapped_column(Integer, index=True)
    prompt_tokens: Mapped[int | None] = mapped_column(Integer)
    completion_tokens: Mapped[int | None] = mapped_column(Integer)
    # An answer's model (a turn continued on a budget's cheaper model names that one) and, of
    # its prompt tokens, those the server read from its cache; NULL in rows from before them.
    model: Mapped[str | None] = mapped_column(String(200))
    cached_tokens: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class ProcessedEvent(Base):
    """Keys of Slack deliveries already handled: event ids and channel+ts of messages."""

    __tablename__ = "processed_events"

    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, index=True)


class ConversationSummary(Base):
    """What older turns said, written by the model when a conversation outgrew its token budget.

    The window sent to the model is then: this summary + the messages after `upto_message_id`.
    """

    __tablename__ = "conversation_summaries"
    __table_args__ = (
        Index("ix_conversation_summaries_conversation_id_id", "conversation_id", "id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    conversation_id: Mapped[int] = mapped_column(ForeignKey("conversations.id", ondelete="CASCADE"))
    upto_message_id: Mapped[int] = mapped_column(Integer)
    summary: Mapped[str] = mapped_column(Text)
    messages_summarised: Mapped[int] = mapped_column(Integer)
    tokens_before: Mapped[int] = mapped_column(Integer)
    tokens_after: Mapped[int] = mapped_column(Integer)
    audience: Mapped[str | None] = mapped_column(Text)  # of the messages it summarises
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class Participant(Base):
    """Who took part in a conversation (started it or wrote in it): what /history may show them."""

    __tablename__ = "conversation_participants"
    __table_args__ = (Index("ix_conversation_participants_user_id", "user_id", "conversation_id"),)

    conversation_id: Mapped[int] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), primary_key=True
    )
    user_id: Mapped[str] = mapped_column(String(32), primary_key=True)


class LiveReply(Base):
    """A reply that is being written in Slack right now, held by one worker's lease.

    Deleted when the reply has its final text. A row whose lease lapsed belongs to a process
    that died mid-reply: start-up (on any replica) finalises that message with a note, so no
    reply is left showing its cursor forever."""

    __tablename__ = "live_replies"

    id: Mapped[int] = mapped_column(primary_key=True)
    channel_id: Mapped[str] = mapped_column(String(32))
    ts: Mapped[str] = mapped_column(String(32))
    shown: Mapped[str] = mapped_column(Text, default="")  # the text the message last showed
    owner: Mapped[str] = mapped_column(String(255))
    lease_expires_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
