"""What a click or a worker is told when a proposal cannot move: the errors of the approvals
core, each with words a person can read."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.approvals.machine import State
from bot.db.models import Proposal
from bot.states import state_label

if TYPE_CHECKING:
    from bot.approvals.ruling import Ruling


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


# The executor's refusals (`bot.approvals.execution`).
class NeedsConfirmation(ApprovalError):
    """A retry that may write twice, clicked without confirming that it may."""


class TamperedApproval(PermissionError):
    """The arguments about to run are not the ones the approvers saw."""


class NotAllowedNow(TamperedApproval):
    """The one door, asked at the start of execution, does not let this revision run."""


def not_allowed(ruling: Ruling) -> NotAllowedNow:
    if ruling.outcome == "deny":
        return NotAllowedNow(
            f"the approval policy in force forbids this action now ({ruling.reason}); "
            "nothing was done"
        )
    return NotAllowedNow(
        "the approval policy in force needs approvals this action does not have now; nothing "
        "was done. Ask the assistant to propose it again"
    )
