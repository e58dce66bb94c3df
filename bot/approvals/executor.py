"""Runs an approved call exactly once: claim (compare-and-set with a lease), re-read the target
and refuse if it changed since the card was shown, run the tool with the exact approved
arguments and the proposal's idempotency key, record the result, update the card, and let the
resume worker continue the turn."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Protocol

from pydantic import BaseModel

from bot.approvals.service import AlreadyHandled, ApprovalsService
from bot.conversation.tool_calls import plain_error
from bot.db.models import Proposal
from bot.tools.registry import (
    Outcome,
    Tool,
    ToolContext,
    ToolError,
    ToolRegistry,
    arguments_hash,
)

log = logging.getLogger(__name__)


class CardRefresher(Protocol):
    async def refresh(self, proposal_id: int) -> None: ...


class StaleTarget(ToolError):
    """The target changed since the card was shown."""


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

    async def run(self, proposal_id: int, retry_by: str | None = None) -> Proposal | None:
        """Execute once; returns the settled proposal, or None if someone else has it."""
        try:
            proposal = await self.approvals.start(proposal_id, self.worker, retry_by)
        except AlreadyHandled:
            if retry_by:
                raise
            return None
        await self.cards.refresh(proposal.id)
        try:
            outcome = await self._execute(proposal)
        except asyncio.CancelledError:
            raise  # shutdown: the lease runs out and recovery marks it interrupted
        except Exception as exc:  # every failure becomes a plain-language error on the card
            log.info("proposal %s failed: %s", proposal.id, exc)
            settled = await self.approvals.fail(proposal, self.worker, plain_error(exc))
        else:
            settled = await self.approvals.succeed(proposal, self.worker, outcome)
        await self.cards.refresh(settled.id)
        self.on_settled()
        return settled

    async def _execute(self, proposal: Proposal) -> Outcome:
        tool = self.registry.get(proposal.tool_name)
        if tool is None:
            raise LookupError(f"the tool {proposal.tool_name!r} is no longer available")
        approved = proposal.approved_arguments
        if approved is None or arguments_hash(approved) != proposal.approved_hash:
            raise PermissionError("the approved arguments do not match what was approved")
        arguments = tool.parse(approved)
        ctx = self.context(proposal)
        await self._check_fresh(tool, arguments, ctx, proposal)
        return await asyncio.wait_for(tool.run(arguments, ctx), self.timeout)

    @staticmethod
    async def _check_fresh(
        tool: Tool[Any], arguments: BaseModel, ctx: ToolContext, proposal: Proposal
    ) -> None:
        """Each previewed old value must still hold; otherwise someone changed the target
        since the card was shown, and running now would overwrite their change."""
        if tool.preview is None:
            return
        now = await tool.preview(arguments, ctx)
        shown = {c["field"]: c.get("old") for c in proposal.preview}
        for change in now.changes:
            if change.field in shown and shown[change.field] != change.old:
                raise StaleTarget(
                    f"stale: {change.field} is now {change.old or '(empty)'!r}, not "
                    f"{shown[change.field] or '(empty)'!r} as shown on the card; nothing was "
                    "overwritten. Ask the assistant again to propose it afresh."
                )
