"""The pause card follows its raise (issue 29): approved and applied, it says "Raised to
$24.00 today by <@U…>" and keeps no buttons (the turn resumes); declined (with the reason),
expired or failed, it says so and keeps its buttons, so the person may continue on the
cheaper model or ask again. Told by the card publisher whenever a raise's card changed
(`CardPublisher.on_change`); the pause card's text is made from the pause and its raise, so
telling it twice shows the same."""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import select

from bot.db.models import BudgetPause, Proposal
from bot.db.session import Database
from bot.poster import NOTHING_PRIVATE, Poster
from bot.slack.raise_form import ASK_RAISE
from bot.spend.ledger import Spend
from bot.spend.pauses import PAUSED
from bot.spend.raise_action import RAISE_TOOL, RaiseArguments
from bot.spend.windows import sentence
from bot.states import State
from bot.tasks import TaskGroup
from bot.text import escape
from bot.tools.packs.budgets import raised_to

log = logging.getLogger(__name__)

CHEAPER = "budget_continue_cheaper"  # the pause card's other button (value: the pause's id)
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


def pause_blocks(pause: BudgetPause, fallback: str | None, *lines: str) -> list[dict[str, Any]]:
    """The pause card: its lines, and while it is paused, its buttons."""
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(lines)[:3000]}}
    ]
    if pause.state != PAUSED:
        return blocks
    buttons = []
    if fallback:
        buttons.append(
            {
                "type": "button",
                "action_id": CHEAPER,
                "text": {"type": "plain_text", "text": "Continue on a cheaper model"},
                "value": str(pause.id),
            }
        )
    buttons.append(
        {
            "type": "button",
            "action_id": ASK_RAISE,
            "text": {"type": "plain_text", "text": "Ask to raise"},
            "value": str(pause.id),
        }
    )
    blocks.append({"type": "actions", "elements": buttons})
    return blocks


class RaiseOutcomes:
    def __init__(self, db: Database, poster: Poster, spend: Spend, tasks: TaskGroup) -> None:
        self.db = db
        self.poster = poster
        self.spend = spend
        self.tasks = tasks

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
        standing = await self.spend.standing(pause.budget, pause.window_key)
        window = standing.window if standing is not None else ""
        said = sentence(standing) if standing is not None else pause.budget
        head = "Budget" if State(proposal.state) is State.SUCCEEDED else "Budget reached"
        lines = (f"{head}: {escape(said)}", what_happened(proposal, window))
        fallback = standing.fallback_model if standing is not None else None
        blocks = pause_blocks(pause, fallback, *lines)
        try:
            await self.poster.update(
                pause.channel_id, pause.card_ts, "\n".join(lines), carries=NOTHING_PRIVATE,
                blocks=blocks,
            )  # fmt: skip
        except Exception as exc:  # the raise stands; only its note on the pause card is lost
            log.warning("pause card %s not updated: %s", pause.id, type(exc).__name__)
