"""SQLAlchemy 2 typed models. Migrations in `migrations/` create exactly these tables."""

from __future__ import annotations

import enum
from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    DateTime,
    Enum,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from bot.states import State

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC datetime on every backend (SQLite hands back naive values)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("naive datetime given; use bot.db.models.utcnow()")
        return value.astimezone(UTC) if value is not None else None

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        dict[str, Any]: JSON,
        list[dict[str, Any]]: JSON,
    }


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
    prompt_tokens: Mapped[int | None] = mapped_column(Integer)
    completion_tokens: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class ProcessedEvent(Base):
    """Keys of Slack deliveries already handled: event ids and channel+ts of messages."""

    __tablename__ = "processed_events"

    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, index=True)


# The states live with the transition table; the column stores their values.
ProposalState = State


class Proposal(Base):
    """One write the model asked for, waiting for (or past) a person's decision."""

    __tablename__ = "proposals"
    __table_args__ = (
        Index("ix_proposals_state_expires_at", "state", "expires_at"),
        Index("ix_proposals_card", "card_channel", "card_ts"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    team_id: Mapped[str] = mapped_column(String(32))
    # NULL once the conversation was forgotten or purged; executed actions keep their (redacted)
    # proposal and audit trail.
    conversation_id: Mapped[int | None] = mapped_column(
        ForeignKey("conversations.id", ondelete="SET NULL"), index=True
    )
    assistant_message_id: Mapped[int | None] = mapped_column(
        ForeignKey("messages.id", ondelete="SET NULL"), index=True
    )
    # The `tool` message that carries this call's result to the model (content NULL = pending).
    result_message_id: Mapped[int | None] = mapped_column(
        ForeignKey("messages.id", ondelete="SET NULL")
    )
    tool_call_id: Mapped[str] = mapped_column(String(128))
    tool_name: Mapped[str] = mapped_column(String(128))
    arguments: Mapped[dict[str, Any]] = mapped_column(JSON)
    arguments_hash: Mapped[str] = mapped_column(String(64))
    description: Mapped[str] = mapped_column(Text)
    preview: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    requester: Mapped[str] = mapped_column(String(32), index=True)
    idempotency_key: Mapped[str] = mapped_column(String(64), unique=True)
    state: Mapped[ProposalState] = mapped_column(
        Enum(
            ProposalState,
            native_enum=False,
            length=16,
            values_callable=lambda e: [m.value for m in e],
        )
    )
    # Bumped by every transition (the compare-and-set guard).
    version: Mapped[int] = mapped_column(Integer, default=1)
    # The arguments' version: 1 when proposed, +1 per edit. A card's buttons carry it, and a
    # vote counts only for the revision its clicker saw.
    revision: Mapped[int] = mapped_column(Integer, default=1)
    revised_by: Mapped[str | None] = mapped_column(String(32))  # author of the last edit
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())
    reminded_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    channel_id: Mapped[str] = mapped_column(String(32))
    thread_ts: Mapped[str | None] = mapped_column(String(32))
    card_channel: Mapped[str | None] = mapped_column(String(32))
    card_ts: Mapped[str | None] = mapped_column(String(32))
    # The `version` the card in Slack last showed; behind `version`, the card still needs an edit.
    card_version: Mapped[int | None] = mapped_column(Integer)
    approved_arguments: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    approved_hash: Mapped[str | None] = mapped_column(String(64))
    approved_revision: Mapped[int | None] = mapped_column(Integer)
    decided_by: Mapped[str | None] = mapped_column(String(32))
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    decline_reason: Mapped[str | None] = mapped_column(Text)
    lease_owner: Mapped[str | None] = mapped_column(String(255))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    result_link: Mapped[str | None] = mapped_column(Text)
    result_summary: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class ProposalApproval(Base):
    """One approver's vote; a quorum of distinct approvers moves a proposal to approved."""

    __tablename__ = "proposal_approvals"
    __table_args__ = (UniqueConstraint("proposal_id", "approver"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    proposal_id: Mapped[int] = mapped_column(ForeignKey("proposals.id", ondelete="CASCADE"))
    approver: Mapped[str] = mapped_column(String(32))
    # What the approver saw: the revision on the card they clicked and its arguments' hash.
    revision: Mapped[int] = mapped_column(Integer, default=1)
    arguments_hash: Mapped[str] = mapped_column(String(64), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class AuditEntry(Base):
    """Every transition, vote, edit and refused click, written in the same transaction."""

    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(primary_key=True)
    proposal_id: Mapped[int] = mapped_column(
        ForeignKey("proposals.id", ondelete="CASCADE"), index=True
    )
    from_state: Mapped[str | None] = mapped_column(String(16))
    to_state: Mapped[str | None] = mapped_column(String(16))
    event: Mapped[str] = mapped_column(String(32))
    actor: Mapped[str] = mapped_column(String(255))
    detail: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, index=True)


class ResumeRequest(Base):
    """Outbox: a paused turn whose proposals are all settled, to be resumed exactly once.

    Inserted in the transaction of the settling transition. A worker claims it with a lease
    (compare-and-set on `lease_expires_at`), renews the lease while the resume runs, and marks it
    done in the transaction that stores the resumed reply; a lapsed lease lets another worker
    take it over, so a crash or an error never loses the continuation."""

    __tablename__ = "resume_requests"
    __table_args__ = (UniqueConstraint("assistant_message_id", "kind"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    conversation_id: Mapped[int] = mapped_column(ForeignKey("conversations.id", ondelete="CASCADE"))
    assistant_message_id: Mapped[int] = mapped_column(ForeignKey("messages.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(32), default="resume")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    claimed_by: Mapped[str | None] = mapped_column(String(255))
    claimed_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), index=True)
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    done_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), index=True)


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


class Task(Base):
    """The built-in `tasks` pack's team task board."""

    __tablename__ = "tasks"
    __table_args__ = (Index("ix_tasks_team_id_status", "team_id", "status"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    team_id: Mapped[str] = mapped_column(String(32))
    title: Mapped[str] = mapped_column(String(300))
    description: Mapped[str] = mapped_column(Text, default="")
    assignee: Mapped[str | None] = mapped_column(String(32), index=True)
    due_date: Mapped[str | None] = mapped_column(String(10))  # ISO date
    priority: Mapped[str] = mapped_column(String(16), default="normal")
    status: Mapped[str] = mapped_column(String(16), default="open")
    created_by: Mapped[str] = mapped_column(String(32))
    idempotency_key: Mapped[str | None] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class TaskComment(Base):
    __tablename__ = "task_comments"

    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id", ondelete="CASCADE"), index=True)
    author: Mapped[str] = mapped_column(String(32))
    body: Mapped[str] = mapped_column(Text)
    idempotency_key: Mapped[str | None] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


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
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class Participant(Base):
    """Who took part in a conversation (started it or wrote in it): what /history may show them."""

    __tablename__ = "conversation_participants"
    __table_args__ = (Index("ix_conversation_participants_user_id", "user_id", "conversation_id"),)

    conversation_id: Mapped[int] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), primary_key=True
    )
    user_id: Mapped[str] = mapped_column(String(32), primary_key=True)
