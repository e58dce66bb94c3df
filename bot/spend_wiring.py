"""The composition root's spend pieces (issue 29): the one ledger, made once the policy has a
budget; the sweeper's job that frees holds of calls cut off by a crash; the pause card's
buttons and the sweeper's job that ends pauses whose window reset; "Ask to raise"; the usage
views; and the ledger's close at shutdown."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from slack_bolt.async_app import AsyncApp

from bot.approvals.policy import GroupMembers
from bot.approvals.service import ApprovalsService
from bot.approvals.sweeper import Sweeper
from bot.config import Settings
from bot.conversation.spending import SpendGate
from bot.conversation.turn import Conversations
from bot.db.models import Proposal
from bot.db.session import Database
from bot.policy.one_door import OneDoor
from bot.policy.source import PolicySource
from bot.slack.budget_clicks import BudgetClicks
from bot.slack.budget_notices import SoftNotices
from bot.slack.card_publisher import CardPublisher
from bot.slack.pause_ends import PauseEnds
from bot.slack.raise_outcomes import RaiseOutcomes
from bot.slack.raise_requests import RaiseRequests
from bot.slack.usage import UsageViews
from bot.tasks import TaskGroup
from bot.tools.catalog import ToolRegistry
from bot.tools.packs.budgets import raise_tool

if TYPE_CHECKING:
    from bot.spend.ledger import Spend

log = logging.getLogger(__name__)


def govern_spend(
    conversations: Conversations,
    settings: Settings,
    db: Database,
    policy: PolicySource,
    groups: GroupMembers,
) -> None:
    """The one spend ledger, made once the policy in force has a budget: its budgets and time
    zone read at every call (a reload applies at once, mid-window too), `MODEL_PRICES` over
    the defaults. Summaries and titles count too; soft thresholds tell the owners."""

    def make() -> Spend:
        from bot.spend.ledger import Spend  # a start without budgets does without it

        spend = Spend(db, policy.budgets, settings.load_prices(), main_model=settings.llm_model)
        if gate.notices is not None:  # decided as charges are written behind
            spend.on_soft = gate.notices.send
        return spend

    gate = conversations.spending
    gate.budgets, gate.make = policy.budgets, make
    gate.groups, gate.notices = groups, SoftNotices(conversations.slack, groups)
    if conversations.titles is not None:
        conversations.titles.spending = gate


def stale_holds_job(conversations: Conversations, settings: Settings) -> Callable[[], Any]:
    """A sweeper job: holds of calls that can no longer be running (a process died
    mid-call) are charged their whole estimate and freed, and leases whose process stopped
    renewing them are charged whole (bot/spend/leases.py `LAPSE`), so a crash never keeps a
    budget's room held. A call ends within its deadline plus one read time-out."""
    older_than = timedelta(
        seconds=settings.model_deadline_seconds + settings.llm_timeout_seconds + 60
    )

    async def release() -> None:
        spend = conversations.spending.ledger()
        if spend is not None:
            released = await spend.release_stale(older_than)
            if released:
                log.warning("charged and freed %d hold(s) of model calls cut off", released)

    return release


def usage_views(
    conversations: Conversations,
    settings: Settings,
    db: Database,
    groups: GroupMembers,
    registry: ToolRegistry,
) -> UsageViews:
    """`/usage` and the App Home's usage: the ledger's standings, each answer at its model's
    price; the budgets of the packs a turn offers apply to each turn."""
    offered = lambda: frozenset(t.pack for t in registry.offered())  # noqa: E731
    ledger, prices = conversations.spending.ledger, settings.load_prices()
    return UsageViews(db, ledger, prices, groups, offered, settings.llm_model)


async def close_spend(conversations: Conversations) -> None:
    """Shutdown: the settles written behind, the budgets' leases given back (what a process
    that dies instead held, the sweeper charges whole)."""
    spend = conversations.spending.spend
    if spend is None:
        return
    try:
        await spend.close()
    except Exception as exc:
        log.warning("spend ledger not closed cleanly: %s", type(exc).__name__)


def pause_buttons(
    bolt: AsyncApp,
    spending: SpendGate,
    cards: CardPublisher,
    sweeper: Sweeper,
    kick: Callable[[], None],
) -> None:
    """ "Continue on a cheaper model" (`kick`: the resume worker), and the sweeper's pass that
    abandons pauses whose window reset and says so on their cards."""
    ends = PauseEnds(cards.approvals.db, cards.poster, spending.ledger, cards.budget)
    sweeper.jobs.append(ends.sweep)
    db, tasks = cards.approvals.db, cards.tasks
    BudgetClicks(db, spending, kick, tasks, cards.slack, cards.budget, ends).register(bolt)


def budget_raises(
    settings: Settings,
    bolt: AsyncApp,
    spending: SpendGate,
    door: OneDoor,
    approvals: ApprovalsService,
    cards: CardPublisher,
    registry: ToolRegistry,
    tasks: TaskGroup,
) -> RaiseRequests:
    """ "Ask to raise" (issue 29): the form and its proposal, and the pause card following
    the raise's outcome (after the App Home's own follower)."""
    registry.add(raise_tool(spending.ledger))  # internal: never offered to the model
    ends = PauseEnds(approvals.db, cards.poster, spending.ledger, cards.budget)
    requests = RaiseRequests(
        approvals.db,
        spending.ledger,
        door,
        approvals,
        cards,
        registry,
        cards.groups,
        tasks,
        timedelta(minutes=settings.proposal_expiry_minutes),
        ends,
    )
    requests.register(bolt)
    outcomes = RaiseOutcomes(approvals.db, cards.poster, spending.ledger, tasks, cards.budget, ends)
    before = cards.on_change

    def changed(proposal: Proposal, approvers: list[str]) -> None:
        if before is not None:
            before(proposal, approvers)
        outcomes.changed(proposal, approvers)

    cards.on_change = changed
    return requests
