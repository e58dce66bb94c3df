"""The pause card follows its raise (issue 29): approved and applied, it says "Raised to
$24.00 today by <@U…>" and keeps no buttons (the turn resumes); declined (with the reason),
expired or failed, it says so and keeps its buttons, so the person may continue on the
cheaper model or ask again. Told by the card publisher whenever a raise's card changed
(`CardPublisher.on_change`); the pause card's text is made from the pause and its raise, so
telling it twice shows the same. A pause whose window reset before its raise settled is
abandoned (`bot.slack.pause_ends`), whatever the raise's outcome: its card says the budget
reset and to ask again, never that the raise resumed anything."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from slack_sdk.models.blocks import Block, ContextBlock, MarkdownTextObject, SectionBlock
from sqlalchemy import select

from bot.db.models import BudgetPause, Proposal
from bot.db.session import Database
from bot.poster import NOTHING_PRIVATE, Poster
from bot.slack.budget_card import REACHED, pause_card
from bot.slack.card_publisher import CardEdit
from bot.slack.edit_budget import EditBudget
from bot.slack.pause_ends import PauseEnds
from bot.spend.pauses import ABANDONED, PAUSED
from bot.spend.raise_action import RAISE_TOOL, RaiseArguments
from bot.spend.standing import Standing
from bot.spend.windows import sentence
from bot.states import State
from bot.tasks import TaskGroup
from bot.text import escape
from bot.tools.packs.budgets import raised_to

if TYPE_CHECKING:
    from bot.spend.ledger import Spend

log = logging.getLogger(__name__)

SETTLED = (
    State.SUCCEEDED,
    State.DECLINED,
    State.EXPIRED,
    State.FAILED,
    State.UNKNOWN,
    State.CHANGES_ASKED,
)


def _who(decider: str | None) -> str:
    return f" by <@{decider}>" if decider and decider[:1] in "UW" and decider.isalnum() else ""


def what_happened(proposal: Proposal, window: str) -> str:
    """The raise's outcome, in a line for the pause card."""
    state = State(proposal.state)
    if state is State.SUCCEEDED:
        shown = RaiseArguments.model_validate(proposal.arguments)
        by = _who(proposal.decided_by)
        return f":white_check_mark: Raised to {raised_to(shown, window)}{by}."
    if state in (State.DECLINED, State.CHANGES_ASKED):
        why = f": {escape(proposal.decline_reason)[:300]}" if proposal.decline_reason else "."
        return f"The raise was declined{_who(proposal.decided_by)}{why}"
    if state is State.EXPIRED:
        return "Nobody decided the raise in time, so the limit stays."
    return "The raise could not be applied; its card says why and may be retried."


def raised_card(said: str, line: str) -> list[dict[str, Any]]:
    """The pause card once its raise applied: what the budget holds now, who raised it; no
    buttons (the turn resumes)."""
    blocks: list[Block] = [
        SectionBlock(text=MarkdownTextObject(text=f":money_with_wings: {said}")),
        ContextBlock(elements=[MarkdownTextObject(text=line)]),
    ]
    return [b.to_dict() for b in blocks]


def still_paused_card(
    standing: Standing | None, pause: BudgetPause, line: str
) -> list[dict[str, Any]]:
    """The pause card as it was made (`budget_card.pause_card`: its buttons still offered)
    with what became of the raise under what was reached."""
    if standing is None:  # the budget left the policy: nothing to offer
        return raised_card(f"{REACHED}: {escape(pause.budget)}", line)
    blocks = pause_card(standing, pause.id, pause.requester)
    note = ContextBlock(elements=[MarkdownTextObject(text=line)]).to_dict()
    return [*blocks[:-1], note, blocks[-1]]


class RaiseOutcomes:
    def __init__(
        self,
        db: Database,
        poster: Poster,
        ledger: Callable[[], Spend | None],
        tasks: TaskGroup,
        budget: EditBudget | None = None,
        ends: PauseEnds | None = None,
    ) -> None:
        """`budget`: the workspace's `chat.update` budget, which the card's edit waits for."""
        self.db = db
        self.poster = poster
        self.budget = budget
        self.ledger = ledger  # `SpendGate.ledger`
        self.tasks = tasks
        self.ends = ends or PauseEnds(db, poster, ledger, budget)

    def changed(self, proposal: Proposal, _approvers: list[str]) -> None:
        """A card changed (`CardPublisher.on_change`): a settled raise updates its pause card."""
        if proposal.tool_name == RAISE_TOOL and State(proposal.state) in SETTLED:
            self.tasks.spawn(self.update(proposal.id), name=f"raise-pause-{proposal.id}")

    async def update(self, proposal_id: int) -> None:
        async with self.db.reading() as session:
            proposal = await session.get(Proposal, proposal_id)
            pause = await session.scalar(
                select(BudgetPause).where(BudgetPause.raise_proposal_id == proposal_id)
            )
        if proposal is None or pause is None or not pause.card_ts:
            return
        if pause.state == ABANDONED or await self.ends.ended(pause):
            return  # its window reset: the card says so (made by whoever abandoned it)
        succeeded = State(proposal.state) is State.SUCCEEDED
        if succeeded and pause.model is not None:
            return  # it had resumed on the cheaper model: the card says so already
        if not succeeded and pause.state != PAUSED:
            return  # resumed or abandoned meanwhile: its card says how
        spend = self.ledger()
        standing = None if spend is None else await spend.standing(pause.budget, pause.window_key)
        line = what_happened(proposal, standing.window if standing is not None else "")
        said = escape(sentence(standing)) if standing is not None else escape(pause.budget)
        if succeeded:
            text, blocks = f"Budget: {said}\n{line}", raised_card(f"Budget: {said}", line)
        else:
            text, blocks = f"{REACHED}: {said}\n{line}", still_paused_card(standing, pause, line)
        try:
            if self.budget is not None:
                await self.budget.acquire(CardEdit())
            await self.poster.update(
                pause.channel_id, pause.card_ts, text, carries=NOTHING_PRIVATE, blocks=blocks
            )
        except Exception as exc:  # the raise stands; only its note on the pause card is lost
            log.warning("pause card %s not updated: %s", pause.id, type(exc).__name__)
