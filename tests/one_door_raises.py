"""The one-door test's levers for budget raises (issue 29): a turn paused at the budget (a
`BudgetPause` row and its card, as the pause flow makes them), "Ask to raise" clicked on it and
its form sent as shown (twice the limit), and how much the budget was raised (the ledger's
record of applied raises)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import func, select

from bot.db.models import BudgetPause, SpendRaise
from bot.slack.budget_card import pause_card
from bot.slack.raise_form import ASK_RAISE
from tests.fakes.slack import TEAM_ID
from tests.one_door_policy import BUDGET
from tests.one_door_world import PUBLIC
from tests.raise_helpers import stored_pause, today

if TYPE_CHECKING:
    from tests.one_door_bot import OneDoorBot

BASE_NANO = 12 * 10**9  # the budget's limit in the generated policies


async def ask_raise(bot: OneDoorBot, requester: str, asker: str) -> int | None:
    """`requester`'s turn pauses; `asker` clicks Ask to raise and sends the form as shown.
    Returns the pause's id."""
    countersign = bot.bot.countersign
    text = f"Budget reached: {BUDGET}"
    pause_id = await stored_pause(countersign.db, requester, PUBLIC, None, None, BUDGET)
    spend = countersign.conversations.spending.ledger()
    assert spend is not None
    standing = await spend.standing(BUDGET, today())
    assert standing is not None
    blocks = pause_card(standing, pause_id, requester)
    posted = await countersign.slack.chat_postMessage(channel=PUBLIC, text=text, blocks=blocks)
    ts = str(posted["ts"])
    async with countersign.db.transaction() as session:
        row = await session.get(BudgetPause, pause_id)
        assert row is not None
        row.card_ts = ts
    before = len(bot.slack.views)
    trigger = f"trigger-{asker}-raise-{pause_id}"
    bot.triggers[trigger] = asker
    await bot.bot._interact(
        {
            "type": "block_actions",
            "user": {"id": asker, "team_id": TEAM_ID},
            "trigger_id": trigger,
            "container": {"type": "message", "message_ts": ts, "channel_id": PUBLIC},
            "channel": {"id": PUBLIC},
            "message": {"ts": ts, "text": text},
            "actions": [
                {"type": "button", "action_id": ASK_RAISE, "block_id": "b",
                 "value": str(pause_id), "action_ts": "1.0"}
            ],
        }
    )  # fmt: skip
    await bot.settle()
    opened = bot.slack.views[before:]
    if opened:
        await bot.bot.submit_view(opened[-1]["view"], asker, {})
        await bot.settle()
    return pause_id


async def raised_nano(bot: OneDoorBot) -> int:
    """How much the budget's window was raised, in nano-dollars."""
    async with bot.bot.countersign.db.reading() as session:
        added = await session.scalar(
            select(func.coalesce(func.sum(SpendRaise.nano), 0)).where(SpendRaise.budget == BUDGET)
        )
    return int(added or 0)
