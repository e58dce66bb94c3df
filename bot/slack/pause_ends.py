"""A paused turn ends with the window it paused in (issue 29, `BudgetPause`): once that window
resets, the turn is abandoned instead of resumed. A week-old card's "Continue on a cheaper
model" would otherwise answer, on last week's terms, a question nobody waits for, and an
approved raise would lift a limit that no longer counts.

Seen on the sweeper's pass (pauses whose stored reset passed) and at every click or raise
outcome that would move the pause (also pauses stored before the reset was kept), whichever
comes first: the move is `abandon_paused`'s compare-and-set, so it happens once, and whoever
made it edits the card (through the workspace's edit budget, as every card edit) to say the
budget reset and to ask again, with no buttons. The clock is the ledger's.

The sweep waits for an edit slot before it ends each pause, and at most `PATIENCE_SECONDS`:
past that it leaves the rest (still paused, and resumable by nobody: every way on checks the
reset) to the next pass. A start-up awaits the sweep and the sweeper's other jobs follow it,
so 60 pauses ending at midnight, or a minute's edits spent by busy cards, must not hold them
for minutes. An edit Slack refused (or a crash before it) leaves the card's buttons showing;
the next click on them ends there and shows the reset card then."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from sqlalchemy import select

from bot.db.models import BudgetPause, utcnow
from bot.db.session import Database
from bot.poster import NOTHING_PRIVATE, Poster
from bot.slack.budget_card import reset_card, reset_text
from bot.slack.card_publisher import CardEdit
from bot.slack.edit_budget import EditBudget
from bot.spend.pauses import ABANDONED, PAUSED, abandon_paused, window_reset

if TYPE_CHECKING:
    from bot.spend.ledger import Spend

log = logging.getLogger(__name__)

NOTE = "its budget's window reset"
SWEEP_MAX = 200  # pauses ended per sweep; the rest wait for the next
PATIENCE_SECONDS = 2.0  # the sweep's wait for an edit slot; past it, the rest wait for the next


class PauseEnds:
    def __init__(
        self,
        db: Database,
        poster: Poster,
        ledger: Callable[[], Spend | None],
        budget: EditBudget | None = None,
    ) -> None:
        """`ledger`: `SpendGate.ledger` (its clock and the budgets in force; none while no
        budget is configured). `budget`: the workspace's `chat.update` budget."""
        self.db = db
        self.poster = poster
        self.ledger = ledger
        self.budget = budget

    def reset(self, pause: BudgetPause) -> bool:
        """Whether the window `pause` stopped in has reset."""
        spend = self.ledger()
        if spend is None:
            return window_reset(pause, utcnow(), [], "UTC")
        budgets, timezone = spend.budgets()
        return window_reset(pause, spend.current_time(), budgets, timezone)

    def over(self, pause: BudgetPause) -> bool:
        """Whether the pause is over (`ended` would say so), changing nothing and calling
        nobody: for an answer Slack waits at most 3 s for (the raise form's), which must not
        wait for the card's edit. The sweep, or the next click, ends it."""
        return pause.state == ABANDONED or (pause.state == PAUSED and self.reset(pause))

    async def ended(self, pause: BudgetPause, card_ts: str | None = None) -> bool:
        """Whether the pause is over because its window reset: abandoned before, or now (and
        then its card says so). `card_ts`: the card a click came from. A click on a pause
        abandoned before came from a card still showing its buttons (its edit was refused, or
        the process died before it): that card is shown the reset now."""
        if pause.state == ABANDONED:
            if card_ts is not None:
                await self.show(pause, card_ts)
            return True
        if pause.state != PAUSED or not self.reset(pause):
            return False
        return await self._abandon(pause, card_ts)

    async def _abandon(
        self, pause: BudgetPause, card_ts: str | None = None, slotted: bool = False
    ) -> bool:
        """End `pause` (compare-and-set) and, if this call ended it, edit its card
        (`slotted`: its edit slot is already taken)."""
        async with self.db.transaction() as session:
            abandoned = await abandon_paused(session, pause.id, NOTE, card_ts)
        if abandoned is None:  # moved meanwhile: resumed first, or abandoned by another
            async with self.db.reading() as session:
                state = await session.scalar(
                    select(BudgetPause.state).where(BudgetPause.id == pause.id)
                )
            return state == ABANDONED
        log.info("budget pause %s abandoned: its window reset", pause.id)
        await self.show(abandoned, slotted=slotted)
        return True

    async def show(
        self, pause: BudgetPause, card_ts: str | None = None, slotted: bool = False
    ) -> None:
        """Edit the abandoned pause's card (`card_ts` where none is recorded) to say so (no
        buttons). Never raises: the pause is over whether or not Slack took the edit."""
        ts = pause.card_ts or card_ts
        if not ts:
            return
        try:
            if self.budget is not None and not slotted:
                await self.budget.acquire(CardEdit())
            await self.poster.update(
                pause.channel_id,
                ts,
                reset_text(pause.budget),
                carries=NOTHING_PRIVATE,
                blocks=reset_card(pause.budget),
            )
        except Exception as exc:
            log.warning("pause card %s not updated: %s", pause.id, type(exc).__name__)

    async def sweep(self) -> None:
        """A sweeper job: end the pauses whose stored reset has passed (oldest first), each
        once its card's edit has a slot; none within `PATIENCE_SECONDS`: the rest next pass."""
        spend = self.ledger()
        now = spend.current_time() if spend is not None else utcnow()
        async with self.db.reading() as session:
            due = list(
                (
                    await session.scalars(
                        select(BudgetPause)
                        .where(BudgetPause.state == PAUSED, BudgetPause.resets_at <= now)
                        .order_by(BudgetPause.id)
                        .limit(SWEEP_MAX)
                    )
                ).all()
            )
        for pause in due:
            if pause.card_ts and self.budget is not None:
                try:
                    await asyncio.wait_for(self.budget.acquire(CardEdit()), PATIENCE_SECONDS)
                except Exception as exc:  # no room (or the process stops): the next pass
                    log.info(
                        "ending paused turns: no edit slot (%s), more later", type(exc).__name__
                    )
                    return
            await self._abandon(pause, slotted=True)
