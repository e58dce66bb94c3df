"""What a click or a worker is told when a proposal cannot move: the errors of the approvals
core, each with words a person can read."""

from __future__ import annotations

from bot.approvals.machine import State
from bot.db.models import Proposal
from bot.states import state_label


class ApprovalError(Exception):
    """A click that changes nothing; `user_message` is shown to the clicker."""

    def __init__(self, user_message: str) -> None:
        super().__init__(user_message)
        self.user_message = user_message


class AlreadyHandled(ApprovalError):
    pass


class NotAuthorised(ApprovalError):
    pass


class UnknownProposal(ApprovalError):
    pass


class CardChanged(ApprovalError):
    """The clicked card showed another revision of the arguments than the proposal has now."""

    def __init__(self) -> None:
        super().__init__(
            "This card changed since you looked at it (its action was edited), so your click "
            "did nothing. Read the updated card, then decide again."
        )


class LeaseLost(Exception):
    """This worker no longer holds the lease on the work it tried to complete."""


def describe_state(proposal: Proposal) -> str:
    who = f" by <@{proposal.decided_by}>" if proposal.decided_by else ""
    return f"already {state_label(State(proposal.state))}{who}"
