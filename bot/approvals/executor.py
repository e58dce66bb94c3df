"""Runs an approved call at most once per attempt.

Claim (compare-and-set with a lease) -> check the arguments are exactly the approved revision ->
re-read the target and refuse if it changed since the card was shown -> run the tool with the
proposal's idempotency key while a heartbeat renews the lease -> record the outcome (only while
holding the lease) -> let the resume worker continue the turn. Card edits are requested, never
awaited: execution does not wait on the workspace's `chat.update` budget.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol

from pydantic import BaseModel

from bot.approvals.execution import Claim
from bot.approvals.service import AlreadyHandled, ApprovalsService, LeaseLost
from bot.db.models import Proposal
from bot.errors import plain_error
from bot.logs import log_context
from bot.metrics import EXECUTIONS, LEASE_LOST
from bot.tools.catalog import ToolRegistry
from bot.tools.pinning import moved
from bot.tools.registry import Outcome, Tool, ToolArgumentsError, ToolContext, ToolError

log = logging.getLogger(__name__)


class CardRefresher(Protocol):
    def refresh(self, proposal_id: int) -> None:
        """Bring the card in line with its proposal soon, without waiting for it."""


class StaleTarget(ToolError):
    """The target changed since the card was shown."""


def lease_for(tool_timeout: float, margin: float = 30.0) -> float:
    """An execution lease longer than the longest a tool may run, by `margin` (`LEASE_SECONDS`:
    how long a dead worker's work waits before another takes it over)."""
    return tool_timeout + margin


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
    ) -> None:
        self.approvals = approvals
        self.registry = registry
        self.cards = cards
        self.context = context
        self.on_settled = on_settled
        self.worker = worker
        self.timeout = timeout
        # Guaranteed by construction (app.py), checked here because the promise rests on it.
        if approvals.lease.total_seconds() <= timeout:
            raise ValueError("the execution lease must be longer than the tool timeout")

    async def run(self, proposal_id: int, retry_by: str | None = None) -> Proposal | None:
        """Execute once; returns the settled proposal, or None if someone else has it."""
        with log_context(proposal_id=proposal_id):
            return await self._run(proposal_id, retry_by)

    async def _run(self, proposal_id: int, retry_by: str | None) -> Proposal | None:
        try:
            claim = await self.approvals.claim(proposal_id, self.worker, retry_by)
        except AlreadyHandled:
            if retry_by:
                raise
            return None
        proposal = claim.proposal
        self.cards.refresh(proposal.id)
        heartbeat = asyncio.get_running_loop().create_task(
            self._heartbeat(proposal), name=f"lease-{proposal.id}"
        )
        try:
            outcome = await self._execute(claim)
        except asyncio.CancelledError:
            raise  # shutdown: the lease lapses and recovery marks it interrupted
        except Exception as exc:  # every failure becomes a plain-language error on the card
            log.info("proposal %s failed: %s", proposal.id, type(exc).__name__)
            result: Outcome | str = plain_error(exc)
        else:
            result = outcome
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat
        try:
            if isinstance(result, Outcome):
                settled = await self.approvals.succeed(proposal, self.worker, result)
            else:
                settled = await self.approvals.fail(proposal, self.worker, result)
        except LeaseLost as exc:
            LEASE_LOST.labels(kind="execution").inc()
            log.error("outcome not recorded, the lease was lost: %s", exc)
            return None
        EXECUTIONS.labels(outcome=settled.state.value).inc()
        self.cards.refresh(settled.id)
        self.on_settled()
        return settled

    async def _heartbeat(self, proposal: Proposal) -> None:
        """Renew the lease while the tool runs (three times per lease period)."""
        period = self.approvals.lease.total_seconds() / 3
        while True:
            await asyncio.sleep(period)
            try:
                held = await self.approvals.renew(proposal, self.worker)
            except Exception:  # a database hiccup: try again next period, well within the lease
                log.warning("could not renew the lease of proposal %s", proposal.id)
                continue
            if not held:
                log.error("lease of proposal %s was taken over", proposal.id)
                return

    async def _execute(self, claim: Claim) -> Outcome:
        proposal = claim.proposal
        tool = self.registry.get(proposal.tool_name)
        if tool is None:
            raise LookupError(f"the tool {proposal.tool_name!r} is no longer available")
        try:
            arguments = tool.parse(claim.approved_arguments())
        except ToolArgumentsError as exc:  # the tool's schema changed under the card
            raise StaleTarget(
                f"stale: the tool {proposal.tool_name} changed since the card was shown and "
                f"no longer accepts the approved arguments ({exc}); nothing was done. Ask the "
                "assistant again to propose it afresh."
            ) from None
        # The check resolves names afresh to compare identities; the run only sends the ids
        # pinned with the approved revision.
        ctx = replace(
            self.context(proposal), pinned=proposal.resolved or {}, proposed_at=proposal.created_at
        )
        await asyncio.wait_for(self._check_fresh(tool, arguments, ctx, proposal), self.timeout)
        run = replace(ctx, use_pinned=True)
        return await asyncio.wait_for(tool.run(arguments, run), self.timeout)

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
