"""Action proposals, their votes, the audit trail and the resume outbox."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    Enum,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import Mapped, mapped_column

from bot.db.models.base import Base, UTCDateTime, utcnow
from bot.states import State

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
    # What the preview was made against beyond its fields (an MCP tool's schema hash, a pull
    # request's head commit); execution refuses if it moved.
    pin: Mapped[str | None] = mapped_column(String(128))
    # Every name the current revision's preview resolved, as ids with the names shown (see
    # `ToolContext.resolve`): what the run sends, and what the check before it compares.
    resolved: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # Who may read what the proposal carries (`bot.audience`), and what its turn had read
    # before proposing it (shown on the card: text that could have steered the proposal).
    audience: Mapped[str | None] = mapped_column(Text)
    # What the turn had read before proposing it (`bot.provenance.Source` as JSON; older
    # rows hold plain labels of tool reads).
    provenance: Mapped[list[Any] | None] = mapped_column(JSON)
    # The policy's decision that made it (outcome, rule, version; an ask's approvers, quorum,
    # four-eyes): who may approve is read from here. NULL: made before policy files.
    policy: Mapped[dict[str, Any] | None] = mapped_column(JSON)
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
    # How many steps of the policy's escalation ladder have been taken (`bot.approvals.routing`).
    escalation_step: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    channel_id: Mapped[str] = mapped_column(String(32))
    thread_ts: Mapped[str | None] = mapped_column(String(32))
    card_channel: Mapped[str | None] = mapped_column(String(32))
    card_ts: Mapped[str | None] = mapped_column(String(32))
    # While `card_channel` is "" a poster holds the right to post the card until then.
    card_claimed_until: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # The `version` the card in Slack last showed; behind `version`, the card still needs an edit.
    card_version: Mapped[int | None] = mapped_column(Integer)
    approved_arguments: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    approved_hash: Mapped[str | None] = mapped_column(String(64))
    approved_revision: Mapped[int | None] = mapped_column(Integer)
    decided_by: Mapped[str | None] = mapped_column(String(32))
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # A decline's reason, or the note of an approver who asked for changes (`changes_asked`).
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
    """Every transition, vote, edit and refused click, written in the same transaction.

    Rows form one hash chain per workspace (`bot.db.audit_chain`): `seq` counts from 1,
    `content_hash` covers every column but the detail, which it covers through `detail_hash`
    (so redacting the detail keeps the row verifiable), and `row_hash` links it to the row
    before (`prev_hash`): an HMAC with `AUDIT_SIGNING_KEY` where `keyed`, a plain hash in rows
    written without the key."""

    __tablename__ = "audit_log"
    __table_args__ = (UniqueConstraint("team_id", "seq"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    team_id: Mapped[str | None] = mapped_column(String(32))
    seq: Mapped[int | None] = mapped_column(Integer)
    proposal_id: Mapped[int] = mapped_column(
        ForeignKey("proposals.id", ondelete="CASCADE"), index=True
    )
    from_state: Mapped[str | None] = mapped_column(String(16))
    to_state: Mapped[str | None] = mapped_column(String(16))
    event: Mapped[str] = mapped_column(String(32))
    actor: Mapped[str] = mapped_column(String(255))
    detail: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, index=True)
    detail_hash: Mapped[str | None] = mapped_column(String(64))
    content_hash: Mapped[str | None] = mapped_column(String(64))
    prev_hash: Mapped[str | None] = mapped_column(String(64))
    row_hash: Mapped[str | None] = mapped_column(String(64))
    keyed: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class AuditChainHead(Base):
    """The newest row of a workspace's audit chain: appending locks this row (compare-and-set
    under `SELECT … FOR UPDATE`), so concurrent transitions make one linear chain."""

    __tablename__ = "audit_chain_heads"

    team_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, default=0)
    head_hash: Mapped[str] = mapped_column(String(64))


class AuditCheckpoint(Base):
    """A workspace's chain head and row count at one moment, signed (HMAC-SHA256) when
    `AUDIT_SIGNING_KEY` is set, and posted to `AUDIT_CHECKPOINT_CHANNEL`."""

    __tablename__ = "audit_checkpoints"

    id: Mapped[int] = mapped_column(primary_key=True)
    team_id: Mapped[str] = mapped_column(String(32), index=True)
    rows: Mapped[int] = mapped_column(Integer)
    head_hash: Mapped[str] = mapped_column(String(64))
    signature: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


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
