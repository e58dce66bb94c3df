"""The `budgets` pack: `budget_raise`, the action an approved "Ask to raise" runs (issue 29).

It is internal: never offered to the model (a model's call naming it is refused as an unknown
tool); the bot proposes it from the raise form (`bot.slack.raise_requests`), and the one door
routes it to the budget's owners (`bot.policy.raises`). Approved, it raises the window's
limits to what the card showed, under the proposal's idempotency key (a retry adds nothing
twice), and resumes the turn that paused at the limit (`bot.spend.pauses.resume_paused`).

Approved after that window reset, it still raises the window it names (what was approved),
but resumes nothing: the pause ended with its window (`bot.spend.pauses.window_reset`), and
its outcome says so instead of "the paused reply continues"."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sqlalchemy import select

from bot.db.models import BudgetPause, Proposal
from bot.spend.pauses import resume_paused, window_reset
from bot.spend.raise_action import (
    RAISE_PACK,
    RAISE_TOOL,
    RaiseArguments,
    limit_money,
    tokens_text,
    when,
)
from bot.spend.standing import Standing, nano_of
from bot.spend.windows import money, window_words
from bot.tools.registry import Change, Outcome, Preview, Tool, ToolContext, ToolError

if TYPE_CHECKING:
    from bot.spend.ledger import Spend

PACK = RAISE_PACK
GONE = "the budget {name} is no longer in the policy in force; nothing was raised"


def raised_to(arguments: RaiseArguments, window: str) -> str:
    """What the raise makes of the window's limits, in words: "$24.00 today"."""
    return f"{_limits(arguments)} {when(window)}"


def _limits(arguments: RaiseArguments) -> str:
    parts = []
    if arguments.usd is not None:
        parts.append(money(nano_of(arguments.usd)))
    if arguments.tokens is not None:
        parts.append(tokens_text(arguments.tokens))
    return " and ".join(parts)


def too_late(arguments: RaiseArguments, window: str) -> str:
    """The outcome of a raise approved after its window reset (`window`: the budget's kind of
    window), which it names in words, not by its key."""
    return (
        f"Raised to {_limits(arguments)} for {window_words(window, arguments.window)}, a window "
        "that has since reset; the paused reply ended with it, so nothing continues."
    )


def limit_changes(arguments: RaiseArguments, standing: Standing) -> list[Change]:
    """Field by field what the raise changes: "Limit today: $12.00 -> $24.00". The new limit
    is what was approved; the old one is only said (it may move before the run, and raising
    to the approved limit is still what the approvers saw), so `old_value` is the new one."""
    words = when(standing.window)
    # The window is sent as its key ("2026-W48"); the card says which window that is.
    found = [Change("Window", None, window_words(standing.window, arguments.window))]
    if arguments.usd is not None:
        new = money(nano_of(arguments.usd))
        old = limit_money(standing.limit_nano)
        found.append(Change(f"Limit {words}", old, new, old_value=new))
    if arguments.tokens is not None:
        new = tokens_text(arguments.tokens)
        old = tokens_text(standing.limit_tokens)
        found.append(Change(f"Token limit {words}", old, new, old_value=new))
    return found


def raise_tool(ledger: Callable[[], Spend | None]) -> Tool[RaiseArguments]:
    """The action, bound to the ledger it raises (`SpendGate.ledger`: none while no budget
    is configured)."""

    def spend_of(arguments: RaiseArguments) -> Spend:
        spend = ledger()
        if spend is None:
            raise ToolError(GONE.format(name=arguments.budget))
        return spend

    async def standing_of(arguments: RaiseArguments) -> Standing:
        found = await spend_of(arguments).standing(arguments.budget, arguments.window)
        if found is None:
            raise ToolError(GONE.format(name=arguments.budget))
        return found

    async def preview(arguments: RaiseArguments, ctx: ToolContext) -> Preview:
        standing = await standing_of(arguments)
        return Preview(
            f"Raise the budget {arguments.budget} to {raised_to(arguments, standing.window)}",
            tuple(limit_changes(arguments, standing)),
        )

    async def run(arguments: RaiseArguments, ctx: ToolContext) -> Outcome:
        standing = await standing_of(arguments)
        if ctx.idempotency_key is None:  # only ever run as an approved proposal
            raise ToolError("a raise runs only once it is approved")
        # "to", not "add": computed under the window's lock, so two raises approved at once
        # end at the higher, never their sum; applied once under the proposal's key.
        spend = spend_of(arguments)
        await spend.raise_to(
            arguments.budget,
            arguments.window,
            arguments.usd,
            arguments.tokens,
            key=ctx.idempotency_key,
        )
        now = spend.current_time()
        if standing.resets_at is not None and standing.resets_at <= now:
            return Outcome(
                {"status": "raised", "budget": arguments.budget, "resumed": False},
                too_late(arguments, standing.window),
            )
        resumed = await resume_asker(ctx, lambda p: window_reset(p, now, *spend.budgets()))
        said = f"Raised to {raised_to(arguments, standing.window)}"
        return Outcome(
            {"status": "raised", "budget": arguments.budget, "resumed": resumed},
            f"{said}; the paused reply continues." if resumed else f"{said}.",
        )

    return Tool(
        RAISE_TOOL,
        "Raise a budget's limits for one window (asked from a budget's pause card).",
        RaiseArguments,
        run,
        preview=preview,
        pack=PACK,
        internal=True,
        finds_earlier_write=True,  # raising to a limit again adds nothing
        mentions="plain",  # the reason is kept and shown escaped: it notifies nobody
    )


async def resume_asker(ctx: ToolContext, reset: Callable[[BudgetPause], bool]) -> bool:
    """Resume the turn paused at the limit that asked for this raise (once: whoever resumes
    it first wins), as decided by the raise's approver; not if its window `reset` (the pause
    is over: the pause card's follower ends it, `bot.slack.raise_outcomes`)."""
    async with ctx.db.transaction() as session:
        proposal = await session.scalar(
            select(Proposal).where(Proposal.idempotency_key == ctx.idempotency_key)
        )
        if proposal is None:
            return False
        pause = await session.scalar(
            select(BudgetPause).where(BudgetPause.raise_proposal_id == proposal.id)
        )
        if pause is None or reset(pause):
            return False
        approver = proposal.decided_by or proposal.requester
        return await resume_paused(session, pause.id, model=None, decided_by=approver) is not None
