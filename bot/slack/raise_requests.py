""" "Ask to raise" on a budget's pause card (issue 29): the click opens the raise form, its
submission becomes a proposal of the internal action `budget_raise`, decided by the one door
like every write (the budget's owners approve, `bot.policy.raises`) and shown on an approval
card made by the card machinery every write uses.

Only the paused turn's requester or an owner of the budget may ask; anyone else is told so,
privately, and nothing opens. One raise waits per pause at a time. A pause whose window reset
is over (`bot.slack.pause_ends`): nothing opens, and the clicker is told to ask again."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from slack_bolt.async_app import AsyncAck, AsyncApp
from sqlalchemy import or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot import audience
from bot.approvals.escalation import expiry_with, ladder
from bot.approvals.policy import GroupMembers
from bot.approvals.questions import record_ruling
from bot.approvals.ruling import Authorise, Question, Ruling, Step
from bot.approvals.service import ApprovalsService
from bot.db.models import BudgetPause, Proposal
from bot.db.session import Database
from bot.durations import parse_duration
from bot.policy.deciders import is_approver
from bot.policy.one_door import SLACK_FAILURES
from bot.slack.budget_card import RESET
from bot.slack.card_publisher import CardPublisher
from bot.slack.pause_ends import PauseEnds
from bot.slack.payloads import BadPayload, button_value, clicker, whole_number
from bot.slack.raise_form import ASK_RAISE, RAISE_MODAL, REASON, Asked, raise_modal, read_raise
from bot.spend.pauses import PAUSED
from bot.spend.raise_action import RAISE_PACK, RAISE_TOOL
from bot.spend.standing import Standing
from bot.states import State
from bot.tasks import TaskGroup
from bot.tools.catalog import ToolRegistry
from bot.tools.registry import ToolArgumentsError, ToolContext, ToolError

if TYPE_CHECKING:
    from bot.spend.ledger import Spend

log = logging.getLogger(__name__)

NOT_PAUSED = "This reply is no longer paused, so there is nothing to raise."
NO_BUDGET = "This budget is no longer in the policy, so there is nothing to raise."
WAITING = "A raise of this budget is already waiting for its owners' decision."
UNCHECKED = "Slack could not tell whether you own this budget right now; try again."
NOT_YOURS = "Only <@{requester}>, whose reply paused, or the budget's owners may ask to raise it."
BAD_FORM = "That form was not made by Countersign, so nothing was asked."
NOT_OURS = "That button was not made by Countersign."
OPEN = (State.PROPOSED, State.APPROVED, State.EXECUTING)


class _Taken(Exception):
    """Another raise of the pause was asked meanwhile (or it stopped being paused)."""


@dataclass
class RaiseRequests:
    db: Database
    ledger: Callable[[], Spend | None]  # `SpendGate.ledger`: none while no budget is set
    door: Authorise
    approvals: ApprovalsService
    cards: CardPublisher
    registry: ToolRegistry
    groups: GroupMembers
    tasks: TaskGroup
    expiry: timedelta  # `PROPOSAL_EXPIRY_MINUTES`, where the policy sets no timeout
    ends: PauseEnds | None = None  # ends a pause whose window reset

    # -- who may ask --------------------------------------------------------------------------
    async def _pause(self, pause_id: int) -> BudgetPause | None:
        async with self.db.reading() as session:
            return await session.get(BudgetPause, pause_id)

    async def _refusal(
        self, pause: BudgetPause | None, user: str, card_ts: str | None = None, end: bool = True
    ) -> tuple[str, None] | tuple[None, Standing]:
        """Why `user` may not ask to raise this pause's budget, or the budget's standing.
        `card_ts`: the card clicked (`PauseEnds.ended`). `end`: a pause whose window reset is
        ended here, and its card edited; not for the form's answer, which Slack waits 3 s for
        (`PauseEnds.over`)."""
        spend = self.ledger()
        if pause is not None and self.ends is not None and await self._over(pause, card_ts, end):
            return RESET, None
        if pause is None or pause.state != PAUSED:
            return NOT_PAUSED, None
        if spend is None:
            return NO_BUDGET, None
        standing = await spend.standing(pause.budget, pause.window_key)
        if standing is None:
            return NO_BUDGET, None
        if user == pause.requester:
            return None, standing
        try:
            if await is_approver(list(standing.owners), user, self.groups.fresh()):
                return None, standing
        except SLACK_FAILURES as exc:
            log.warning("budget owners' groups unreadable: %s", type(exc).__name__)
            return UNCHECKED, None
        return NOT_YOURS.format(requester=pause.requester), None

    async def _over(self, pause: BudgetPause, card_ts: str | None, end: bool) -> bool:
        assert self.ends is not None
        return await self.ends.ended(pause, card_ts) if end else self.ends.over(pause)

    # -- the button ---------------------------------------------------------------------------
    async def open_form(self, body: dict[str, Any], client: Any) -> None:
        try:
            user, pause_id = clicker(body), whole_number(button_value(body))
        except BadPayload as exc:
            log.info("refused an Ask to raise payload: %s", exc)
            return
        channel = str((body.get("channel") or {}).get("id") or "")
        thread_ts = (body.get("message") or {}).get("thread_ts")
        card_ts = (body.get("message") or {}).get("ts")
        pause = await self._pause(pause_id)
        if pause is None or pause.channel_id != channel:  # a pause's button is on its card
            if channel:
                await self.cards.tell(channel, user, NOT_OURS, thread_ts)
            return
        clicked = card_ts if isinstance(card_ts, str) and 0 < len(card_ts) <= 32 else None
        refusal, standing = await self._refusal(pause, user, clicked)
        if refusal is not None or standing is None:
            await self.cards.tell(channel, user, refusal or NOT_PAUSED, thread_ts)
            return
        trigger = body.get("trigger_id")
        if isinstance(trigger, str) and trigger:
            await client.views_open(trigger_id=trigger, view=raise_modal(pause.id, standing))

    # -- the form -----------------------------------------------------------------------------
    async def submit(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        """Validated inline: Slack shows the errors on the form, and nothing is proposed."""
        view = body.get("view") or {}
        try:
            user = clicker(body)
            pause_id = whole_number(view.get("private_metadata"))
        except BadPayload:
            await ack(response_action="errors", errors={REASON: BAD_FORM})
            return
        values = _typed(view)
        pause = await self._pause(pause_id)
        refusal, standing = await self._refusal(pause, user, end=False)
        if refusal is not None or standing is None or pause is None:
            await ack(response_action="errors", errors={REASON: (refusal or NOT_PAUSED)[:150]})
            return
        asked = read_raise(values, standing)
        if not isinstance(asked, Asked):
            await ack(response_action="errors", errors=asked)
            return
        made = await self._propose(pause, user, asked)
        if isinstance(made, str):
            await ack(response_action="errors", errors={REASON: made[:150]})
            return
        await ack()
        self.tasks.spawn(self.cards.post(made), name=f"raise-card-{made.id}")

    async def _propose(self, pause: BudgetPause, user: str, asked: Asked) -> Proposal | str:
        """The raise as a proposal decided by the one door; or why nothing was proposed."""
        arguments = asked.arguments.model_dump(mode="json", exclude_none=True)
        question = Question(
            team_id=pause.team_id,
            tool=RAISE_TOOL,
            pack=RAISE_PACK,
            arguments=arguments,
            channel=pause.channel_id,
            thread_ts=pause.thread_ts,
            requester=user,
            audience=audience.WORKSPACE,  # a budget's name and figures, and the asker's words
        )
        ruling = await self.door(question, Step.PROPOSE)
        if ruling.outcome == "deny":
            await self.approvals.record(question, ruling, Step.PROPOSE, user)
            return f"The approval policy in force forbids this raise ({ruling.reason})."
        tool = self.registry.get(RAISE_TOOL)
        if tool is None:
            return NO_BUDGET
        ctx = ToolContext(
            db=self.db,
            slack=self.cards.slack,
            team_id=pause.team_id,
            channel_id=pause.channel_id,
            requester=user,
        )
        try:
            preview = await tool.prepare(tool.parse(arguments), ctx)
        except (ToolError, ToolArgumentsError) as exc:  # invisible characters in the reason, …
            return str(exc)
        try:
            async with self.db.transaction() as session:
                proposal = await self.approvals.propose(
                    session,
                    team_id=pause.team_id,
                    conversation_id=pause.conversation_id,
                    assistant_message_id=None,
                    result_message_id=None,
                    tool_call_id=f"raise:{pause.id}",
                    tool_name=RAISE_TOOL,
                    arguments=arguments,
                    preview=preview,
                    requester=user,
                    channel_id=pause.channel_id,
                    thread_ts=pause.thread_ts,
                    expires_in=self._expiry(ruling),
                    policy=ruling.record,
                )
                proposal.audience = audience.WORKSPACE
                record_ruling(session, question, ruling, Step.PROPOSE, None, proposal.id)
                await _link(session, pause.id, proposal.id)
        except _Taken as exc:
            return str(exc)
        return proposal

    def _expiry(self, ruling: Ruling) -> timedelta:
        timeout = ruling.record.get("timeout")
        if timeout:
            return parse_duration(timeout)
        return expiry_with(ladder(ruling.record), self.expiry)

    def register(self, app: AsyncApp) -> None:
        @app.action(ASK_RAISE)
        async def _ask(ack: AsyncAck, body: dict[str, Any], client: Any) -> None:
            await ack()  # within Slack's 3 s; the trigger lasts 3 s too, so no queueing
            self.tasks.spawn(self.open_form(body, client), name="ask-raise")

        @app.view(RAISE_MODAL)
        async def _submit(ack: AsyncAck, body: dict[str, Any]) -> None:
            await self.submit(ack, body)


async def _link(session: AsyncSession, pause_id: int, proposal_id: int) -> None:
    """Tie the raise to its pause (compare-and-set): the pause must still be paused, with no
    other raise waiting; otherwise the whole proposal is rolled back."""
    earlier = await session.scalar(
        select(BudgetPause.raise_proposal_id).where(BudgetPause.id == pause_id)
    )
    if earlier is not None:
        state = await session.scalar(select(Proposal.state).where(Proposal.id == earlier))
        if state is not None and State(state) in OPEN:
            raise _Taken(WAITING)
    result = await session.execute(
        update(BudgetPause)
        .where(
            BudgetPause.id == pause_id,
            BudgetPause.state == PAUSED,
            or_(
                BudgetPause.raise_proposal_id.is_(None),
                BudgetPause.raise_proposal_id == earlier,
            ),
        )
        .values(raise_proposal_id=proposal_id, version=BudgetPause.version + 1)
    )
    if getattr(result, "rowcount", 0) != 1:
        raise _Taken(WAITING)


def _typed(view: dict[str, Any]) -> dict[str, str]:
    """Block id -> the text typed in its input (as `parse_submission` reads them)."""
    found: dict[str, str] = {}
    values = (view.get("state") or {}).get("values") or {}
    for block_id, inputs in list(values.items())[:20] if isinstance(values, dict) else []:
        element = (inputs or {}).get("value") if isinstance(inputs, dict) else None
        typed = element.get("value") if isinstance(element, dict) else None
        if isinstance(block_id, str) and isinstance(typed, str):
            found[block_id] = typed[:1000]
    return found
