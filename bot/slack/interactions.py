"""Approve / Decline / Ask for changes / Edit / Retry: acknowledge at once, parse the payload,
authorise the clicker, then hand the decision to the approvals service.

A button names the proposal and the revision its card showed; a click on a revision that is no
longer current changes nothing and the clicker is told, privately, that the card changed. Every
refused click changes nothing, is explained to the clicker only, and leaves an audit row. Card
edits are requested, never awaited, so nothing here waits on the `chat.update` budget.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp

from bot.approvals.executor import Executor
from bot.approvals.policy import GroupMembers, Policies, Policy
from bot.approvals.ruling import Authorise, Ruling
from bot.approvals.service import (
    ApprovalError,
    ApprovalsService,
    CardChanged,
    NeedsConfirmation,
)
from bot.db.models import Proposal
from bot.metrics import DECISIONS
from bot.slack import cards
from bot.slack.card_publisher import CardPublisher
from bot.slack.card_rerouting import announce_reroute
from bot.slack.door_at_clicks import DoorAtClicks
from bot.slack.edit_form import edit_fields, edit_modal
from bot.slack.modal_submissions import ModalSubmissions
from bot.slack.note_forms import ask_changes_modal, decline_modal
from bot.slack.payloads import BadPayload, Click, parse_click
from bot.states import State, state_label
from bot.tasks import TaskGroup
from bot.tools.catalog import ToolRegistry
from bot.tools.registry import ToolContext

log = logging.getLogger(__name__)
NOT_EDITABLE = "This request cannot be edited here; decline it and ask again instead."


@dataclass
class Interactions(ModalSubmissions):
    approvals: ApprovalsService
    registry: ToolRegistry
    policies: Policies
    groups: GroupMembers
    cards: CardPublisher
    executor: Executor
    tasks: TaskGroup
    context: Callable[[Proposal], ToolContext]
    on_settled: Callable[[], None]

    door: Authorise

    def policy_for(self, proposal: Proposal) -> Policy:
        """Who decides `proposal`: as its cards say (`CardRouting.policy_of`)."""
        return self.cards.policy_of(proposal)

    async def _judged(
        self, proposal: Proposal, user: str, action: str
    ) -> tuple[Proposal, Ruling, str | None]:
        """The one door's answer for `user`'s `action` (the proposal rerouted first if the
        policy in force names other deciders), and why it changes nothing (already audited),
        or None. Nobody decides on what they may not read, nor under a policy no longer in
        force."""
        keeper = DoorAtClicks(self.door, self.approvals, self.registry)
        before = proposal.version
        proposal, ruling = await keeper.judge(proposal, user, action)
        if proposal.version != before and proposal.state is State.PROPOSED:
            self.tasks.spawn(announce_reroute(self.cards, proposal), name="reroute")
        reason = keeper.refusal(ruling, action)
        if reason is not None:
            await self.approvals.refuse(proposal.id, user, action, reason)
            DECISIONS.labels(action=action, result="refused").inc()
        return proposal, ruling, reason

    async def _tell(self, click: Click, text: str) -> None:
        if click.channel:
            await self.cards.tell(click.channel, click.user, text, click.thread_ts)

    async def _stale(self, click: Click, action: str) -> None:
        """The clicked card shows an older revision: nothing changes; say so privately."""
        await self.approvals.refuse(click.proposal_id, click.user, action, "the card changed")
        DECISIONS.labels(action=action, result="stale").inc()
        await self._tell(click, CardChanged().user_message)
        self.cards.refresh(click.proposal_id)

    async def _clicked(
        self, body: dict[str, Any], action: str
    ) -> tuple[Click, Proposal, Ruling | None] | None:
        """The click and its proposal if the clicker may act on that revision; otherwise they
        are told why (privately) and None is returned."""
        try:
            click = parse_click(body)
        except BadPayload as exc:
            log.info("refused a %s payload: %s", action, exc)
            DECISIONS.labels(action=action, result="bad_input").inc()
            return None
        try:
            proposal = await self.approvals.get(click.proposal_id)
        except ApprovalError as exc:
            await self._tell(click, exc.user_message)
            return None
        stale = action != "retry" and click.revision != proposal.revision
        if stale and proposal.state.value == "proposed":
            await self._stale(click, action)
            return None
        if action == "edit" and click.user == proposal.requester:
            return click, proposal, None  # the requester may always reword their own request
        proposal, ruling, refusal = await self._judged(proposal, click.user, action)
        if refusal:
            await self._tell(click, f"Nothing changed: {refusal}.")
            return None
        return click, proposal, ruling

    # -- buttons -----------------------------------------------------------------------------
    async def approve(self, body: dict[str, Any], grant: str | None = None) -> None:
        """An Approve button; `grant` (thread, channel, me): the approval also leaves a grant
        of that scope when it is the one that approves (a stranger's click makes nothing)."""
        clicked = await self._clicked(body, "approve")
        if clicked is None:
            return
        click, proposal, ruling = clicked
        assert ruling is not None
        required = ruling.approvals_required
        try:
            vote = await self.approvals.vote(
                proposal.id,
                click.revision or 0,
                click.user,
                required,
                ruling.four_eyes or ruling.failed_closed,
                digest=click.digest,
                grant=grant,
            )
        except CardChanged:
            await self._stale(click, "approve")
            return
        except ApprovalError as exc:
            DECISIONS.labels(action="approve", result="already_handled").inc()
            await self._tell(click, exc.user_message)
            self.cards.refresh(proposal.id)
            self.on_settled()
            return
        DECISIONS.labels(action="approve", result="accepted").inc()
        if vote.approved_now:
            self.tasks.spawn(self.executor.run(proposal.id), name=f"execute-{proposal.id}")
        else:
            await self._tell(
                click,
                f"Your approval is recorded ({len(vote.approvers)} of {required}).",
            )
        self.cards.refresh(proposal.id)

    async def open_decline(self, body: dict[str, Any], client: Any) -> None:
        clicked = await self._clicked(body, "decline")
        if clicked is not None and clicked[0].trigger_id:
            click, proposal, _ruling = clicked
            await client.views_open(
                trigger_id=click.trigger_id,
                view=decline_modal(proposal.id, proposal.revision, proposal.description),
            )

    async def open_ask_changes(self, body: dict[str, Any], client: Any) -> None:
        """Ask for changes: authorised like Approve and Decline; the modal asks for the note.
        A card already decided opens nothing (its state says why)."""
        clicked = await self._clicked(body, "ask_changes")
        if clicked is None or not clicked[0].trigger_id:
            return
        click, proposal, _ruling = clicked
        if proposal.state is not State.PROPOSED:
            await self.approvals.refuse(proposal.id, click.user, "ask_changes", "already decided")
            DECISIONS.labels(action="ask_changes", result="already_handled").inc()
            await self._tell(
                click, f"Nothing changed: this action is already {state_label(proposal.state)}."
            )
            self.cards.refresh(proposal.id)
            return
        await client.views_open(
            trigger_id=click.trigger_id,
            view=ask_changes_modal(proposal.id, proposal.revision, proposal.description),
        )

    async def retry(self, body: dict[str, Any], confirmed: bool = False) -> None:
        """Retry; `confirmed`: clicked "Retry anyway" through its dialog saying it may write
        twice (needed after an unknown outcome of a tool that cannot find its earlier write)."""
        clicked = await self._clicked(body, "retry")
        if clicked is None:
            return
        click, proposal, _ruling = clicked
        try:
            await self.executor.run(proposal.id, retry_by=click.user, confirmed=confirmed)
        except NeedsConfirmation as exc:  # it may write twice: only "Retry anyway" runs it
            await self.approvals.refuse(proposal.id, click.user, "retry", "not confirmed")
            DECISIONS.labels(action="retry", result="refused").inc()
            await self._tell(click, exc.user_message)
            return
        except ApprovalError as exc:
            DECISIONS.labels(action="retry", result="already_handled").inc()
            await self._tell(click, exc.user_message)
            return
        DECISIONS.labels(action="retry", result="accepted").inc()

    async def open_edit(self, body: dict[str, Any], client: Any) -> None:
        clicked = await self._clicked(body, "edit")
        if clicked is None or not clicked[0].trigger_id:
            return
        click, proposal, _ruling = clicked
        tool = self.registry.get(proposal.tool_name)
        if tool is None:
            await self._tell(click, "This tool is no longer available.")
            return
        if tool.internal:  # its arguments come from the bot's own form (a budget raise)
            await self._tell(click, NOT_EDITABLE)
            return
        await client.views_open(
            trigger_id=click.trigger_id,
            view=edit_modal(
                cards.card_ref(proposal.id, proposal.revision),
                edit_fields(tool, proposal.arguments),
            ),
        )

    def register(self, app: AsyncApp) -> None:
        async def ack_then(ack: AsyncAck, body: dict[str, Any], handler: Any, *args: Any) -> None:
            await ack()  # within Slack's 3 s; the decision runs as a tracked task
            self.tasks.spawn(handler(body, *args), name="click")

        @app.action(cards.APPROVE)
        async def _approve(ack: AsyncAck, body: dict[str, Any]) -> None:
            await ack_then(ack, body, self.approve)

        def granting(scope: str) -> Any:  # Bolt passes arguments by their names
            async def _grant(ack: AsyncAck, body: dict[str, Any]) -> None:
                await ack_then(ack, body, self.approve, scope)

            return _grant

        for scope, action_id in cards.APPROVE_GRANT.items():
            app.action(action_id)(granting(scope))

        @app.action(cards.DECLINE)
        async def _decline(ack: AsyncAck, body: dict[str, Any], client: Any) -> None:
            await ack_then(ack, body, self.open_decline, client)

        @app.action(cards.ASK_CHANGES)
        async def _ask_changes(ack: AsyncAck, body: dict[str, Any], client: Any) -> None:
            await ack_then(ack, body, self.open_ask_changes, client)

        @app.action(cards.EDIT)
        async def _edit(ack: AsyncAck, body: dict[str, Any], client: Any) -> None:
            await ack_then(ack, body, self.open_edit, client)

        @app.action(cards.RETRY)
        async def _retry(ack: AsyncAck, body: dict[str, Any]) -> None:
            await ack_then(ack, body, self.retry)

        @app.action(cards.RETRY_CONFIRMED)
        async def _retry_confirmed(ack: AsyncAck, body: dict[str, Any]) -> None:
            await ack_then(ack, body, self.retry, True)

        @app.view(cards.DECLINE_MODAL)
        async def _submit_decline(ack: AsyncAck, body: dict[str, Any]) -> None:
            await self.submit_decline(ack, body)

        @app.view(cards.ASK_CHANGES_MODAL)
        async def _submit_ask_changes(ack: AsyncAck, body: dict[str, Any]) -> None:
            await self.submit_ask_changes(ack, body)

        @app.view(cards.EDIT_MODAL)
        async def _submit_edit(ack: AsyncAck, body: dict[str, Any]) -> None:
            await self.submit_edit(ack, body)
