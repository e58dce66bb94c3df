"""Posting approval cards and keeping them in step with their proposal.

A refresh always re-reads the proposal, under a per-proposal lock, so the last edit shows the
newest state even when several refreshes race. Card edits share the workspace's `chat.update`
budget with live replies, as final-priority edits.
"""

from __future__ import annotations

import asyncio
import json
import logging
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.approvals.machine import State
from bot.approvals.policy import Policies
from bot.approvals.service import ApprovalsService
from bot.db.models import Proposal
from bot.slack.cards import CardView, approval_card
from bot.slack.edit_budget import EditBudget
from bot.slack.errors import slack_error
from bot.tools.registry import ToolRegistry

log = logging.getLogger(__name__)


@dataclass
class _CardEdit:
    wants_final: bool = True
    last_edit_at: float | None = None


class CardPublisher:
    def __init__(
        self,
        slack: AsyncWebClient,
        budget: EditBudget,
        approvals: ApprovalsService,
        registry: ToolRegistry,
        policies: Policies,
    ) -> None:
        self.slack = slack
        self.budget = budget
        self.approvals = approvals
        self.registry = registry
        self.policies = policies
        self._locks: weakref.WeakValueDictionary[int, asyncio.Lock] = weakref.WeakValueDictionary()
        # What each card last showed, so a click that changed nothing costs no chat.update
        # (the budget is shared with every live reply).
        self._shown: OrderedDict[int, str] = OrderedDict()
        # Told after a card changed (the App Home of the people concerned follows it).
        self.on_change: Callable[[Proposal, list[str]], None] | None = None

    def _remember(self, proposal_id: int, text: str, blocks: list[dict[str, object]]) -> bool:
        """False if the card already shows exactly this."""
        rendered = json.dumps([text, blocks], sort_keys=True)
        if self._shown.get(proposal_id) == rendered:
            return False
        self._shown[proposal_id] = rendered
        self._shown.move_to_end(proposal_id)
        while len(self._shown) > 2000:
            self._shown.popitem(last=False)
        return True

    def _lock(self, proposal_id: int) -> asyncio.Lock:
        lock = self._locks.get(proposal_id)
        if lock is None:
            lock = asyncio.Lock()
            self._locks[proposal_id] = lock
        return lock

    async def view(self, proposal: Proposal) -> CardView:
        tool = self.registry.get(proposal.tool_name)
        policy = self.policies.for_tool(proposal.tool_name, tool.pack if tool else "")
        approvers = await self.approvals.approvers_of(proposal.id)
        return CardView(
            proposal_id=proposal.id,
            state=State(proposal.state.value),
            description=proposal.description,
            changes=list(proposal.preview),
            requester=proposal.requester,
            expires_at=proposal.expires_at,
            approvers=approvers,
            approvals_required=policy.approvals_required,
            destructive=bool(tool and tool.destructive),
            decided_by=proposal.decided_by,
            decided_at=proposal.decided_at,
            decline_reason=proposal.decline_reason,
            result_summary=proposal.result_summary,
            result_link=proposal.result_link,
            error=proposal.error,
        )

    async def post(self, proposal: Proposal) -> None:
        text, blocks = approval_card(await self.view(proposal))
        try:
            posted = await self.slack.chat_postMessage(
                channel=proposal.channel_id, thread_ts=proposal.thread_ts, text=text, blocks=blocks
            )
        except SlackApiError as exc:
            log.error("could not post the card of proposal %s: %s", proposal.id, slack_error(exc))
            return
        self._remember(proposal.id, text, blocks)
        await self.approvals.set_card(proposal.id, str(posted["channel"]), str(posted["ts"]))

    async def refresh(self, proposal_id: int) -> None:
        async with self._lock(proposal_id):
            proposal = await self.approvals.get(proposal_id)
            if not proposal.card_ts or not proposal.card_channel:
                return
            text, blocks = approval_card(await self.view(proposal))
            if not self._remember(proposal_id, text, blocks):
                return
            await self.budget.acquire(_CardEdit())
            try:
                await self.slack.chat_update(
                    channel=proposal.card_channel, ts=proposal.card_ts, text=text, blocks=blocks
                )
            except SlackApiError as exc:
                log.warning("could not update card %s: %s", proposal_id, slack_error(exc))
            if self.on_change is not None:
                self.on_change(proposal, await self.approvals.approvers_of(proposal.id))

    async def tell(self, channel: str, user: str, text: str, thread_ts: str | None) -> None:
        """An ephemeral note to one person (e.g. why their click changed nothing)."""
        try:
            await self.slack.chat_postEphemeral(
                channel=channel, user=user, text=text, thread_ts=thread_ts
            )
        except SlackApiError as exc:
            log.warning("could not tell %s: %s", user, slack_error(exc))
