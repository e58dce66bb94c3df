"""The pause card's buttons (`bot.slack.budget_card`).

"Continue on a cheaper model": only the paused turn's requester may choose it; the pause moves
to `resumed` by compare-and-set with its resume request (`bot.spend.pauses.resume_paused`), so
a double click, two replicas or a click after a raise resumed it resume the turn once, and the
second click is told it was already handled. The card is then updated in place to say who chose
what. "Ask to raise" is `bot.slack.raise_requests`.

A pause whose window reset is over (`bot.slack.pause_ends`): the click changes nothing and
says so. A pause whose budget left the policy in force (a reload) has nothing to wait for:
Continue resumes it on the usual model, whose calls every budget still in force counts (one
that has no room pauses it again, with its own card).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from slack_bolt.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_sdk.web.async_client import AsyncWebClient

from bot.db.models import BudgetPause
from bot.db.session import Database
from bot.poster import NOTHING_PRIVATE, poster_of
from bot.slack.budget_card import (
    CONTINUE_CHEAPER,
    REACHED,
    RESET,
    chosen_card,
    chosen_line,
    chosen_text,
)
from bot.slack.card_publisher import CardEdit
from bot.slack.edit_budget import EditBudget
from bot.slack.pause_ends import PauseEnds
from bot.slack.payloads import BadPayload, _dict, _str, _user, button_value, whole_number
from bot.spend.pauses import PAUSED, resume_paused
from bot.spend.windows import sentence
from bot.tasks import TaskGroup
from bot.text import escape

if TYPE_CHECKING:
    from bot.spend.budget_model import Budget
    from bot.spend.ledger import Spend

log = logging.getLogger(__name__)

ALREADY = "This paused request was already handled."
NOT_OURS = "That button was not made by Countersign."
NO_FALLBACK = "This budget no longer names a cheaper model: ask an owner to raise it instead."


class SpendLedger(Protocol):
    """Where the ledger is (`bot.conversation.spending.SpendGate`): none without budgets."""

    def ledger(self) -> Spend | None: ...


def only_requester(requester: str) -> str:
    return f"Only <@{requester}>, whose request was paused, can continue it on a cheaper model."


@dataclass(frozen=True)
class PauseClick:
    user: str
    pause_id: int
    channel: str
    thread_ts: str | None
    card_ts: str | None  # the message clicked: the card, even before its ts is recorded


def parse_pause_click(body: dict[str, Any]) -> PauseClick:
    try:
        pause_id = whole_number(button_value(body))  # not "²" nor past the id column's range
    except BadPayload:
        raise BadPayload("not a pause") from None
    channel = _str(_dict(body.get("channel")).get("id"), 32) or _str(
        _dict(body.get("container")).get("channel_id"), 32
    )
    if channel is None:
        raise BadPayload("no channel")
    message = _dict(body.get("message"))
    card = _str(message.get("ts"), 32) or _str(_dict(body.get("container")).get("message_ts"), 32)
    return PauseClick(_user(body), pause_id, channel, _str(message.get("thread_ts"), 32), card)


class BudgetClicks:
    def __init__(
        self,
        db: Database,
        spend: SpendLedger,
        kick: Callable[[], None],
        tasks: TaskGroup,
        slack: AsyncWebClient,
        budget: EditBudget | None = None,
        ends: PauseEnds | None = None,
    ) -> None:
        """`budget`: the workspace's `chat.update` budget, which the card's edit waits for;
        `ends`: how a pause whose window reset is ended (made here if not given)."""
        self.db = db
        self.spend = spend
        self.kick = kick  # the resume worker: a resumed pause waits in its outbox
        self.tasks = tasks
        self.poster = poster_of(slack)
        self.budget = budget
        self.ends = ends or PauseEnds(db, self.poster, spend.ledger, budget)

    def register(self, app: AsyncApp) -> None:
        @app.action(CONTINUE_CHEAPER)
        async def _continue(ack: AsyncAck, body: dict[str, Any]) -> None:
            await ack()
            self.tasks.spawn(self.continue_cheaper(body), name="budget-continue")

    async def continue_cheaper(self, body: dict[str, Any]) -> None:
        try:
            click = parse_pause_click(body)
        except BadPayload as exc:
            log.info("refused a budget click: %s", exc)
            return
        async with self.db.reading() as session:
            pause = await session.get(BudgetPause, click.pause_id)
        if pause is None or pause.channel_id != click.channel:
            await self._tell(click, NOT_OURS)
            return
        if await self.ends.ended(pause, click.card_ts):
            await self._tell(click, RESET)
            return
        if click.user != pause.requester:
            await self._tell(click, only_requester(pause.requester))
            return
        if pause.state != PAUSED:
            await self._tell(click, ALREADY)
            return
        budget = self._budget(pause.budget)
        model = budget.fallback_model if budget is not None else None
        if budget is not None and model is None:
            await self._tell(click, NO_FALLBACK)
            return
        async with self.db.transaction() as session:
            resumed = await resume_paused(
                session, pause.id, model=model, decided_by=click.user, card_ts=click.card_ts
            )
        if resumed is None:
            await self._tell(click, ALREADY)
            return
        self.kick()
        await self._chosen(resumed, model, click.user)

    def _budget(self, name: str) -> Budget | None:
        """The budget in the policy in force now (a reload may change or drop it)."""
        spend = self.spend.ledger()
        if spend is None:
            return None
        return next((b for b in spend.budgets()[0] if b.name == name), None)

    async def _chosen(self, pause: BudgetPause, model: str | None, user: str) -> None:
        if pause.card_ts is None:
            return
        reached = f"{REACHED}: {escape(pause.budget)}"
        line = chosen_line(model, user, pause.budget)
        try:
            spend = self.spend.ledger()
            if spend is not None:
                standing = await spend.standing(pause.budget, pause.window_key)
                if standing is not None:
                    reached = f"{REACHED}: {escape(sentence(standing))}"
        except Exception as exc:  # the card still says who chose what
            log.warning("budget %s unreadable for its card: %s", pause.budget, exc)
        try:
            if self.budget is not None:
                await self.budget.acquire(CardEdit())
            await self.poster.update(
                pause.channel_id,
                pause.card_ts,
                chosen_text(reached, line),
                carries=NOTHING_PRIVATE,
                blocks=chosen_card(reached, line),
            )
        except Exception as exc:  # the turn resumes all the same
            log.warning("could not update the pause card of %s: %s", pause.id, exc)

    async def _tell(self, click: PauseClick, text: str) -> None:
        try:
            await self.poster.ephemeral(
                click.channel, click.user, text, carries=NOTHING_PRIVATE, thread_ts=click.thread_ts
            )
        except Exception as exc:
            log.warning("could not answer a budget click: %s", type(exc).__name__)
