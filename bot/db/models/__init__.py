"""SQLAlchemy 2 typed models, one module per part of the data flow. Migrations in
`migrations/` create exactly these tables (a test compares them)."""

from bot.db.models.base import Base, UTCDateTime, utcnow
from bot.db.models.conversations import (
    Conversation,
    ConversationSummary,
    LiveReply,
    Message,
    Participant,
    ProcessedEvent,
    Role,
)
from bot.db.models.feedback import AnswerFeedback
from bot.db.models.files import SharedFile
from bot.db.models.grants import Grant
from bot.db.models.policy import PolicyDecision
from bot.db.models.proposals import (
    AuditChainHead,
    AuditCheckpoint,
    AuditEntry,
    Proposal,
    ProposalApproval,
    ProposalState,
    ResumeRequest,
)
from bot.db.models.routing import CardCopy, CardMiss
from bot.db.models.spend import (
    BudgetPause,
    SpendLease,
    SpendRaise,
    SpendReservation,
    SpendWindow,
)
from bot.db.models.stops import StopEntry
from bot.db.models.tasks import Task, TaskComment
from bot.db.models.welcomes import Welcome

__all__ = [
    "AnswerFeedback",
    "AuditChainHead",
    "AuditCheckpoint",
    "AuditEntry",
    "Base",
    "BudgetPause",
    "CardCopy",
    "CardMiss",
    "Conversation",
    "ConversationSummary",
    "Grant",
    "LiveReply",
    "Message",
    "Participant",
    "PolicyDecision",
    "ProcessedEvent",
    "Proposal",
    "ProposalApproval",
    "ProposalState",
    "ResumeRequest",
    "Role",
    "SharedFile",
    "SpendLease",
    "SpendRaise",
    "SpendReservation",
    "SpendWindow",
    "StopEntry",
    "Task",
    "TaskComment",
    "UTCDateTime",
    "Welcome",
    "utcnow",
]
