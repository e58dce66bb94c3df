"""The approvals service: one object with every way a proposal moves, assembled from modules
split by concern: the compare-and-set core (`ledger`), people's decisions (`decisions`), the
executor's leases (`execution`), the clock (`clock`) and the cards' bookkeeping
(`card_state`)."""

from __future__ import annotations

from bot.approvals.card_state import CardState
from bot.approvals.clock import Clock
from bot.approvals.decisions import Decisions, VoteResult
from bot.approvals.execution import Executions, TamperedApproval
from bot.approvals.ledger import (
    AlreadyHandled,
    ApprovalError,
    CardChanged,
    LeaseLost,
    NotAuthorised,
    UnknownProposal,
    result_for_model,
)

__all__ = [
    "AlreadyHandled",
    "ApprovalError",
    "ApprovalsService",
    "CardChanged",
    "LeaseLost",
    "NotAuthorised",
    "TamperedApproval",
    "UnknownProposal",
    "VoteResult",
    "result_for_model",
]


class ApprovalsService(Decisions, Executions, Clock, CardState):
    """Propose, decide, execute under a lease, expire and recover: see each base class."""
