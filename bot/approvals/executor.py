"""Runs an approved call at most once per attempt.

Claim (compare-and-set with a lease) -> check the arguments are exactly the approved revision ->
re-read the target and refuse if it changed since the card was shown -> run the tool with the
proposal's idempotency key while a heartbeat renews the lease (and stops the tool if it cannot)
-> record the outcome (only while holding the lease): succeeded, failed (nothing was written),
or unknown (the request went out and its answer was lost: it may have been written) -> let the
resume worker continue the turn. The re-read and the run share one deadline inside the lease.
Card edits are requested, never awaited: execution does not wait on the `chat.update` budget.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from pydantic import BaseModel

from bot.approvals.execution import Claim
from bot.approvals.outcomes import outcome_unknown, unknown_error
from bot.approvals.ruling import Authorise
from bot.approvals.service import AlreadyHandled, ApprovalsService, LeaseLost
from bot.db.models import Proposal
from bot.errors import plain_error
from bot.keyed_messages import single_attempt
from bot.logs import log_context
from bot.metrics import EXECUTIONS, LEASE_LOST
from bot.tools.catalog import ToolRegistry
from bot.tools.context import said_by
from bot.tools.pinning import moved
from bot.tools.registry import (
    Outcome,
    Tool,
    ToolArgumentsError,
    ToolContext,
    ToolError,
    read_label,
)

log = logging.getLogger(__name__)


class CardRefresher(Protocol):
    def refresh(self, proposal_id: int) -> None:
        """Bring the card in line with its proposal soon, without waiting for it."""


@dataclass(frozen=True)
class ReadOutcome(Outcome):
    """The outcome of a read that ran after approval (`Executions.succeed` gives its result
    the read's audience and source)."""


class StaleTarget(ToolError):
    """The target changed since the card was shown."""


def lease_for(tool_timeout: float, margin: float = 30.0) -> float:
    """An execution lease longer than the longest a tool may run, by `margin` (`LEASE_SECONDS`:
    how long a dead worker's work waits before another takes it over)."""
    return tool_timeout + margin


@dataclass
class _Progress:
    running: bool = False  # the tool's run began: a failure from here on may follow a write
    read: bool = False  # a read a person approved: its failure never leaves a write behind


class Executor:
    def __init__(
        self,
        approvals: ApprovalsService,
        registry: ToolRegistry,
        cards: CardRefresher,
        context: Callable[[Proposal], ToolContext],
        on_settled: Callable[[], None],
        worker: str,
        timeout: float = 60.0,
        door: Authorise | None = None,
    ) -> None:
        """`door`: the one door, asked at the start of every execution (the bot always has
        one; the approvals core's own tests run without)."""
        self.approvals = approvals
        self.registry = registry
        self.cards = cards
        self.context = context
        self.on_settled = on_settled
        self.worker = worker
        self.timeout = timeout
        self.door = door
        # Guaranteed by construction (app.py), checked here because the promise rests on it.
        if approvals.lease.total_seconds() <= timeout:
            raise ValueError("the execution lease must be longer than the tool timeout")

    async def run(
        self, proposal_id: int, retry_by: str | None = None, confirmed: bool = False
    ) -> Proposal | None:
        """Execute once; returns the settled proposal, or None if someone else has it (or
        this worker lost its lease). `confirmed`: the retry's clicker confirmed it may write
        twice (needed to retry an unknown outcome of a tool that cannot look for it)."""
        with log_context(proposal_id=proposal_id):
            return await self._run(proposal_id, retry_by, confirmed)

    def _finds_earlier_write(self, tool_name: str) -> bool:
        tool = self.registry.get(tool_name)
        return bool(tool and tool.finds_earlier_write)

    async def _run(
        self, proposal_id: int, retry_by: str | None, confirmed: bool
    ) -> Proposal | None:
        loop = asyncio.get_running_loop()
        # Read before the claim: its lease counts from a moment later, so the one deadline of
        # the re-read plus the run always falls inside the lease.
        claimed_at = loop.time()
        try:
            claim = await self.approvals.claim(
                proposal_id,
                self.worker,
                retry_by,
                confirmed,
                self._finds_earlier_write,
                self.door,
            )
        except AlreadyHandled:
            if retry_by:
                raise
            return None
        proposal = claim.proposal
        self.cards.refresh(proposal.id)
        progress = _Progress()
        work = loop.create_task(
            self._execute(claim, claimed_at + self.timeout, progress), name=f"tool-{proposal.id}"
        )
        fence = loop.create_task(
            self._heartbeat(proposal, work, claimed_at), name=f"lease-{proposal.id}"
        )
        said = None  # whose words a failure carries (`ToolError.source`)
        try:
            result: Outcome | str = await work
            lost = False
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # shutdown: the lease lapses and recovery marks the outcome unknown
            # The fence stopped the tool: this worker can no longer hold the lease.
            LEASE_LOST.labels(kind="execution").inc()
            why = fence.result() if fence.done() and not fence.cancelled() else "fenced"
            log.error("proposal %s: tool stopped, %s", proposal.id, why)
            return None
        except Exception as exc:  # every failure becomes a plain-language error on the card
            log.info("proposal %s failed: %s", proposal.id, type(exc).__name__)
            said = said_by(exc)
            lost = progress.running and not progress.read and outcome_unknown(exc)
            result = (
                unknown_error(exc, self._finds_earlier_write(proposal.tool_name))
                if lost
                else plain_error(exc)
            )
        finally:
            if not fence.done():
                fence.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await fence
        try:
            if isinstance(result, Outcome):
                read = isinstance(result, ReadOutcome)
                settled = await self.approvals.succeed(proposal, self.worker, result, read)
            elif lost:
                settled = await self.approvals.lose(proposal, self.worker, result)
            else:
                settled = await self.approvals.fail(proposal, self.worker, result, said)
        except LeaseLost as exc:
            LEASE_LOST.labels(kind="execution").inc()
            log.error("outcome not recorded, the lease was lost: %s", exc)
            return None
        EXECUTIONS.labels(outcome=settled.state.value).inc()
        self.cards.refresh(settled.id)
        self.on_settled()
        return settled

    async def _heartbeat(self, proposal: Proposal, work: asyncio.Task[Any], since: float) -> str:
        """Renew the lease while the tool runs (three times per lease period). Fencing: if the
        lease was taken over, or renewals keep failing until the lease is about to lapse, the
        tool is cancelled before another worker may take the work over, so two workers never
        run one attempt at once. Returns why it stopped the tool."""
        loop = asyncio.get_running_loop()
        lease = self.approvals.lease.total_seconds()
        period = lease / 3
        safety = period / 2  # left for the cancelled tool to unwind before the lease lapses
        held_until = since + lease
        wait = period
        while True:
            await asyncio.sleep(max(0.0, min(wait, held_until - safety - loop.time())))
            sent = loop.time()
            if sent >= held_until - safety:
                work.cancel()
                return "its lease could not be renewed before it lapsed"
            try:
                held = await asyncio.wait_for(
                    self.approvals.renew(proposal, self.worker), held_until - safety - sent
                )
            except Exception:  # the database is unreachable: try again soon, within the lease
                log.warning("could not renew the lease of proposal %s", proposal.id)
                wait = min(period, 1.0)
                continue
            if not held:
                work.cancel()
                return "its lease was taken over by another worker"
            held_until, wait = sent + lease, period

    async def _execute(self, claim: Claim, deadline: float, progress: _Progress) -> Outcome:
        """The re-read and the run, under one deadline inside the lease."""
        proposal = claim.proposal
        async with asyncio.timeout_at(deadline):
            tool = self.registry.get(proposal.tool_name)
            if tool is None:
                raise LookupError(f"the tool {proposal.tool_name!r} is no longer available")
            try:
                arguments = tool.parse(claim.approved_arguments())
            except ToolArgumentsError as exc:  # the tool's schema changed under the card
                raise StaleTarget(
                    f"stale: the tool {proposal.tool_name} changed since the card was shown "
                    f"and no longer accepts the approved arguments ({exc}); nothing was done. "
                    "Ask the assistant again to propose it afresh."
                ) from None
            # The check resolves names afresh to compare identities; the run only sends the
            # ids pinned with the approved revision.
            ctx = replace(
                self.context(proposal), pinned=proposal.resolved or {}, since=proposal.decided_at
            )
            ctx.slack = single_attempt(ctx.slack)  # a lost answer is never sent again
            await self._check_fresh(tool, arguments, ctx, proposal)
            progress.running, progress.read = True, not tool.requires_approval
            done = await tool.run(arguments, replace(ctx, use_pinned=True))
            if tool.requires_approval:
                return done
            # A read a person approved: its result goes to the model with the audience it
            # declared; the card says only that it ran (the result may be narrower than
            # where the card is).
            return ReadOutcome(
                done.result,
                "Ran; its result went to the assistant.",
                audience=done.audience,
                source=read_label(tool, arguments, done.source),
            )

    @staticmethod
    async def _check_fresh(
        tool: Tool[Any], arguments: BaseModel, ctx: ToolContext, proposal: Proposal
    ) -> None:
        """Each previewed old value must still hold; otherwise someone changed the target
        since the card was shown, and running now would overwrite their change."""
        if tool.preview is None:
            return
        now = await tool.prepare(arguments, ctx)
        if proposal.pin is not None and now.pin != proposal.pin:
            raise StaleTarget(
                f"stale: {now.pin_changed or 'what this action was prepared against changed'} "
                "since the card was shown; nothing was done. Ask the assistant again to "
                "propose it afresh."
            )
        renamed = moved(proposal.resolved or {}, now.resolved)
        if renamed:
            raise StaleTarget(
                f"stale: {renamed}; nothing was done. Ask the assistant again to propose it afresh."
            )
        shown = {c["field"]: c for c in proposal.preview}
        for change in now.changes:
            before = shown.get(change.field)
            if before is None:
                continue
            compared = before.get("old_value", before.get("old"))
            if compared != change.compared:
                raise StaleTarget(
                    f"stale: {change.field} is now {change.old or '(empty)'!r}, not "
                    f"{before.get('old') or '(empty)'!r} as shown on the card; nothing was "
                    "overwritten. Ask the assistant again to propose it afresh."
                )
