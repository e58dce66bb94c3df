"""Every click and form on a card asks the one door (`bot.policy.one_door`) before anything
moves: may this person decide this revision now, under the policy in force. When the door
names other deciders than the card does (the policy was reloaded since), the proposal follows
it first (its votes are void, the new approvers are sent the card) and the click is judged by
the new deciders; the clicker is told privately why a click changed nothing."""

from __future__ import annotations

from dataclasses import dataclass

from bot.approvals.questions import question_of
from bot.approvals.ruling import Authorise, Ruling, Step
from bot.approvals.service import ApprovalsService
from bot.db.models import Proposal
from bot.states import State
from bot.tools.catalog import ToolRegistry

STEPS = {
    "approve": Step.VOTE,
    "decline": Step.DECIDE,
    "ask_changes": Step.DECIDE,
    "edit": Step.DECIDE,  # opening the form; the submitted revision is decided as an Edit
    "retry": Step.RETRY,
}


def forbidden(ruling: Ruling) -> str:
    return f"the approval policy in force forbids this action ({ruling.reason or ruling.rule})"


@dataclass
class DoorAtClicks:
    door: Authorise
    approvals: ApprovalsService
    registry: ToolRegistry

    def pack_of(self, proposal: Proposal) -> str:
        tool = self.registry.get(proposal.tool_name)
        return tool.pack if tool else ""

    async def judge(self, proposal: Proposal, user: str, action: str) -> tuple[Proposal, Ruling]:
        """The door's answer for `user`'s `action` on the proposal's current revision, with
        the proposal as it is after following the door (rerouted, if it had to be)."""
        step = STEPS.get(action, Step.DECIDE)
        question = question_of(proposal, self.pack_of(proposal))
        ruling = await self.door(question, step, actor=user)
        if State(proposal.state) is State.PROPOSED and ruling.reroutes(proposal.policy):
            moved = await self.approvals.reroute(proposal.id, proposal.version, ruling)
            if moved is not None:
                proposal = moved
        await self.approvals.record(question, ruling, step, user)
        return proposal, ruling

    @staticmethod
    def refusal(ruling: Ruling, action: str) -> str | None:
        """Why the click changes nothing, or None."""
        if ruling.outcome == "deny" and action in ("approve", "retry"):
            return forbidden(ruling)
        return ruling.refusal
