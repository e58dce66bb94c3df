"""What the "Ask to raise" tests share: a policy with a budget and its owners, a turn paused at
that budget (a `BudgetPause` row and its card with the button, as the pause flow makes them),
and the steps of asking, through the front door."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select

from bot.db.models import AuditEntry, BudgetPause, Conversation, Proposal, SpendRaise
from bot.db.session import Database
from bot.slack import budget_card
from bot.slack.raise_form import ASK_RAISE
from bot.spend.ledger import Spend
from bot.spend.raise_action import RAISE_TOOL
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import TEAM_ID, FakeSlack, StoredMessage, wait_until
from tests.harness import RunningBot, running

BUDGET = "support-daily"
BASE_NANO = 12 * 10**9  # its limit in `budget_policy`
FINANCE = "S0FINANCE"


def budget_policy(owners: str = f"[UBOB, {FINANCE}]", rules: str = "rules: []") -> str:
    return f"""\
version: 1
default: ask
{rules}
budgets:
  - name: {BUDGET}
    scope: {{workspace: true}}
    window: day
    usd: 12.00
    owners: {owners}
    fallback_model: gpt-4o-mini
"""


async def stored_pause(
    db: Database,
    requester: str,
    channel: str,
    thread_ts: str | None,
    conversation: int | None,
    budget: str = BUDGET,
) -> int:
    """A turn of `requester`'s paused at `budget` today, as the pause flow stores it: its id."""
    async with db.transaction() as session:
        pause = BudgetPause(
            team_id=TEAM_ID,
            conversation_id=conversation,
            requester=requester,
            channel_id=channel,
            thread_ts=thread_ts,
            turn_key=f"turn:{thread_ts or requester}",
            budget=budget,
            window_key=today(),
            state="paused",
        )
        session.add(pause)
        await session.flush()
        return pause.id


async def pause_turn(
    bot: RunningBot, slack: FakeSlack, model: FakeOpenAI, user: str = "UALICE"
) -> tuple[int, StoredMessage]:
    """A turn answered once, then paused at the budget: the pause and its card."""
    model.script(Script(text="first answer"))
    ts = await bot.mention("C1", "help me", slack, user=user)
    await bot.idle()
    text = f"Budget reached: {BUDGET}, $12.00 of $12.00 today"
    async with bot.countersign.db.transaction() as session:
        conversation = await session.scalar(
            select(Conversation.id).where(Conversation.thread_ts == ts)
        )
    pause_id = await stored_pause(bot.countersign.db, user, "C1", ts, conversation)
    standing = await ledger(bot).standing(BUDGET, today())
    assert standing is not None
    blocks = budget_card.pause_card(standing, pause_id, user)
    posted = await bot.countersign.slack.chat_postMessage(
        channel="C1", thread_ts=ts, text=text, blocks=blocks
    )
    async with bot.countersign.db.transaction() as session:
        row = await session.get(BudgetPause, pause_id)
        assert row is not None
        row.card_ts = str(posted["ts"])
    return pause_id, pause_card(slack, str(posted["ts"]))


def pause_card(slack: FakeSlack, ts: str) -> StoredMessage:
    return next(m for m in slack.bot_messages("C1") if m.ts == ts)


async def ask(
    bot: RunningBot,
    slack: FakeSlack,
    card: StoredMessage,
    user: str = "UALICE",
    typed: dict[str, Any] | None = None,
) -> tuple[int, str]:
    """`user` clicks Ask to raise and submits the form (`typed`: what they change on it);
    the form's answer (status, body)."""
    opened = len(slack.views)
    assert await bot.click(card, ASK_RAISE, user, "C1") == 200
    await bot.idle()
    assert len(slack.views) == opened + 1, "no form opened"
    view = slack.views[-1]["view"]
    answer = await bot.submit_view(view, user, typed or {})
    await bot.idle()
    return answer


async def raises(bot: RunningBot) -> list[Proposal]:
    async with bot.countersign.db.reading() as session:
        found = await session.scalars(
            select(Proposal).where(Proposal.tool_name == RAISE_TOOL).order_by(Proposal.id)
        )
        return list(found.all())


async def pause_state(bot: RunningBot, pause_id: int) -> str:
    async with bot.countersign.db.reading() as session:
        pause = await session.get(BudgetPause, pause_id)
        assert pause is not None
        return pause.state


async def audit_events(bot: RunningBot, proposal_id: int) -> list[str]:
    async with bot.countersign.db.reading() as session:
        rows = await session.scalars(
            select(AuditEntry).where(AuditEntry.proposal_id == proposal_id).order_by(AuditEntry.id)
        )
        return [r.event for r in rows]


async def card_in(slack: FakeSlack, channel: str) -> StoredMessage:
    await wait_until(lambda: bool(slack.cards(channel)), timeout=10)
    return slack.cards(channel)[-1]


def shows(message: StoredMessage) -> str:
    return message.text + json.dumps(message.blocks)


def today() -> str:
    """The key of the day window now (the policy's time zone: UTC)."""
    return datetime.now(UTC).date().isoformat()


async def applied(bot: RunningBot) -> list[tuple[str, str, int, str]]:
    """The raises the ledger applied: (budget, window, nano-dollars added, key)."""
    async with bot.countersign.db.reading() as session:
        rows = await session.scalars(select(SpendRaise).order_by(SpendRaise.id))
        return [(r.budget, r.window_key, r.nano, r.key) for r in rows]


async def until_applied(bot: RunningBot, count: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while len(await applied(bot)) < count:
        assert time.monotonic() < deadline, "the raise was not applied"
        await asyncio.sleep(0.02)


def ledger(bot: RunningBot) -> Spend:
    spend = bot.countersign.conversations.spending.ledger()
    assert spend is not None
    return spend


async def limit_now(bot: RunningBot) -> int | None:
    """The budget's money limit in today's window, raises included (nano-dollars)."""
    standing = await ledger(bot).standing(BUDGET, today())
    return None if standing is None else standing.limit_nano


@asynccontextmanager
async def raising_bot(
    slack: FakeSlack, model: FakeOpenAI, database_url: str, tmp_path: Path, policy: str
) -> AsyncIterator[RunningBot]:
    """A bot under `policy` (a budget and its owners: Bob and the finance group, Cat)."""
    path = tmp_path / "policy.yaml"
    path.write_text(policy)
    slack.user_groups[FINANCE] = ["UCAT"]
    async with running(slack, model, database_url, policy_file=path) as bot:
        yield bot
