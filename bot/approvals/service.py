"""The approvals service: one object with every way a proposal moves, assembled from modules
split by concern: the compare-and-set core (`ledger`), people's decisions (`decisions`), the
executor's leases (`execution`), the clock (`clock`), the cards' bookkeeping
(`card_state`, `card_copies`), the escalation ladder (`escalation`) and a Stop's
withdrawals (`withdrawal`)."""

from __future__ import annotations

from bot.approvals.card_copies import CardCopies
from bot.approvals.card_state import CardState
from bot.approvals.clock import Clock
from bot.approvals.decisions import VoteResult
from bot.approvals.editing import Editing
from bot.approvals.errors import (
    AlreadyHandled,
    ApprovalError,
    CardChanged,
    LeaseLost,
    NeedsConfirmation,
    NotAuthorised,
    TamperedApproval,
    UnknownProposal,
)
from bot.approvals.escalation import Escalated, Escalations
from bot.approvals.execution import Executions
from bot.approvals.model_results import result_for_model
from bot.approvals.rerouting import Rerouting
from bot.approvals.withdrawal import OpenTurn, Withdrawals

__all__ = [
    "AlreadyHandled",
    "ApprovalError",
    "ApprovalsService",
    "CardChanged",
    "Escalated",
    "LeaseLost",
    "NeedsConfirmation",
    "NotAuthorised",
    "OpenTurn",
    "TamperedApproval",
    "UnknownProposal",
    "VoteResult",
    "result_for_model",
]


class ApprovalsService(
    Editing, Executions, Clock, Escalations, CardState, CardCopies, Withdrawals, Rerouting
):
    """Propose, decide, execute under a lease, expire, withdraw and recover: see each base
    class."""
