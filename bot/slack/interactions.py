"""Approve / Decline / Edit / Retry: acknowledge at once, authorise the clicker, then hand the
decision to the approvals service. Every refused click changes nothing, is explained to the
clicker only, and leaves an audit row."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel
from slack_bolt.async_app import AsyncAck, AsyncApp

from bot.approvals.executor import Executor
from bot.approvals.policy import GroupMembers, Policies, may_approve
from bot.approvals.service import ApprovalError, ApprovalsService
from bot.db.models import Proposal
from bot.slack import cards
from bot.slack.card_publisher import CardPublisher
from bot.tasks import TaskGroup
from bot.tools.registry import Tool, ToolArgumentsError, ToolContext, ToolRegistry

log = logging.getLogger(__name__)


class Interactions:
    def __init__(
        self,
        approvals: ApprovalsService,
        registry: ToolRegistry,
        policies: Policies,
        groups: GroupMembers,
        card_publisher: CardPublisher,
        executor: Executor,
        tasks: TaskGroup,
        context: Callable[[Proposal], ToolContext],
        on_settled: Callable[[], None],
    ) -> None:
        self.approvals = approvals
        self.registry = registry
        self.policies = policies
        self.groups = groups
        self.cards = card_publisher
        self.executor = executor
        self.tasks = tasks
        self.context = context
        self.on_settled = on_settled

    def _tool(self, proposal: Proposal) -> Tool[Any] | None:
        return self.registry.get(proposal.tool_name)

    async def _authorise(self, proposal: Proposal, user: str, action: str) -> str | None:
        """None if `user` may decide on `proposal`; else the reason (already audited)."""
        tool = self._tool(proposal)
        policy = self.policies.for_tool(proposal.tool_name, tool.pack if tool else "")
        verdict = await may_approve(policy, proposal.requester, user, self.groups)
        if verdict.allowed:
            return None
        await self.approvals.refuse(proposal.id, user, action, verdict.reason)
        return verdict.reason

    async def _tell(self, body: dict[str, Any], text: str) -> None:
        channel = (body.get("channel") or {}).get("id") or (body.get("container") or {}).get(
            "channel_id"
        )
        message = body.get("message") or {}
        thread = message.get("thread_ts")
        if channel:
            await self.cards.tell(str(channel), body["user"]["id"], text, thread)

    async def _clicked(self, body: dict[str, Any], action: str) -> Proposal | None:
        """The proposal behind a button, if the clicker may act on it; otherwise they are told
        why (privately) and None is returned. The requester may always edit their own."""
        user, proposal_id = body["user"]["id"], int(body["actions"][0]["value"])
        try:
            proposal = await self.approvals.get(proposal_id)
        except ApprovalError as exc:
            await self._tell(body, exc.user_message)
            return None
        if action == "edit" and user == proposal.requester:
            return proposal
        refusal = await self._authorise(proposal, user, action)
        if refusal:
            await self._tell(body, f"Nothing changed: {refusal}.")
            return None
        return proposal

    # -- buttons -----------------------------------------------------------------------------
    async def approve(self, body: dict[str, Any]) -> None:
        user, proposal_id = body["user"]["id"], int(body["actions"][0]["value"])
        proposal = await self._clicked(body, "approve")
        if proposal is None:
            return
        try:
            tool = self._tool(proposal)
            policy = self.policies.for_tool(proposal.tool_name, tool.pack if tool else "")
            vote = await self.approvals.vote(proposal_id, user, policy.approvals_required)
        except ApprovalError as exc:
            await self._tell(body, exc.user_message)
            await self.cards.refresh(proposal_id)
            self.on_settled()
            return
        await self.cards.refresh(proposal_id)
        if vote.approved_now:
            self.tasks.spawn(self.executor.run(proposal_id), name=f"execute-{proposal_id}")
        else:
            await self._tell(
                body,
                f"Your approval is recorded ({len(vote.approvers)} of "
                f"{policy.approvals_required}).",
            )

    async def open_decline(self, body: dict[str, Any], client: Any) -> None:
        proposal = await self._clicked(body, "decline")
        if proposal is not None:
            await client.views_open(
                trigger_id=body["trigger_id"],
                view=cards.decline_modal(proposal.id, proposal.description),
            )

    async def retry(self, body: dict[str, Any]) -> None:
        proposal = await self._clicked(body, "retry")
        if proposal is None:
            return
        try:
            await self.executor.run(proposal.id, retry_by=body["user"]["id"])
        except ApprovalError as exc:
            await self._tell(body, exc.user_message)

    async def open_edit(self, body: dict[str, Any], client: Any) -> None:
        proposal = await self._clicked(body, "edit")
        if proposal is None:
            return
        tool = self._tool(proposal)
        if tool is None:
            await self._tell(body, "This tool is no longer available.")
            return
        await client.views_open(
            trigger_id=body["trigger_id"],
            view=cards.edit_modal(proposal.id, edit_fields(tool.arguments, proposal.arguments)),
        )

    # -- modals ------------------------------------------------------------------------------
    async def submit_decline(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        view = body["view"]
        user, proposal_id = body["user"]["id"], int(view["private_metadata"])
        values = view["state"]["values"]
        reason = (values.get("reason", {}).get("value", {}) or {}).get("value") or None
        try:
            proposal = await self.approvals.get(proposal_id)
            refusal = await self._authorise(proposal, user, "decline")
            if refusal:
                await ack(response_action="errors", errors={"reason": refusal})
                return
            await self.approvals.decline(proposal_id, user, reason)
        except ApprovalError as exc:
            await ack(response_action="errors", errors={"reason": exc.user_message})
            return
        await ack()
        await self.cards.refresh(proposal_id)
        self.on_settled()

    async def submit_edit(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        view = body["view"]
        user, proposal_id = body["user"]["id"], int(view["private_metadata"])
        try:
            proposal = await self.approvals.get(proposal_id)
        except ApprovalError as exc:
            log.info("edit of proposal %s: %s", proposal_id, exc.user_message)
            await ack()  # the proposal is gone; closing the modal is all that is left
            return
        tool = self._tool(proposal)
        if tool is None or tool.preview is None:
            await ack()  # nothing to edit any more; the card says what happened
            return
        first = next(iter(tool.arguments.model_fields))
        if user != proposal.requester:
            refusal = await self._authorise(proposal, user, "edit")
            if refusal:
                await ack(response_action="errors", errors={first: refusal})
                return
        raw = submitted_arguments(view["state"]["values"], tool.arguments)
        try:
            arguments = tool.parse_strings(raw)
        except ToolArgumentsError as exc:
            fields = list(tool.arguments.model_fields)
            await ack(response_action="errors", errors=field_errors(str(exc), fields))
            return
        preview = await tool.preview(arguments, self.context(proposal))
        try:
            await self.approvals.edit(proposal_id, user, arguments.model_dump(mode="json"), preview)
        except ApprovalError as exc:
            await ack(response_action="errors", errors={first: exc.user_message})
            return
        await ack()
        await self.cards.refresh(proposal_id)

    def register(self, app: AsyncApp) -> None:
        async def ack_then(ack: AsyncAck, body: dict[str, Any], handler: Any, *args: Any) -> None:
            await ack()  # within Slack's 3 s; the decision runs as a tracked task
            self.tasks.spawn(handler(body, *args), name=f"click-{body.get('trigger_id')}")

        @app.action(cards.APPROVE)
        async def _approve(ack: AsyncAck, body: dict[str, Any]) -> None:
            await ack_then(ack, body, self.approve)

        @app.action(cards.DECLINE)
        async def _decline(ack: AsyncAck, body: dict[str, Any], client: Any) -> None:
            await ack_then(ack, body, self.open_decline, client)

        @app.action(cards.EDIT)
        async def _edit(ack: AsyncAck, body: dict[str, Any], client: Any) -> None:
            await ack_then(ack, body, self.open_edit, client)

        @app.action(cards.RETRY)
        async def _retry(ack: AsyncAck, body: dict[str, Any]) -> None:
            await ack_then(ack, body, self.retry)

        @app.view(cards.DECLINE_MODAL)
        async def _submit_decline(ack: AsyncAck, body: dict[str, Any]) -> None:
            await self.submit_decline(ack, body)

        @app.view(cards.EDIT_MODAL)
        async def _submit_edit(ack: AsyncAck, body: dict[str, Any]) -> None:
            await self.submit_edit(ack, body)


MULTILINE = {"description", "body", "text"}


def edit_fields(
    model: type[BaseModel], current: dict[str, Any]
) -> list[tuple[str, str, str, bool, bool]]:
    fields = []
    for name, info in model.model_fields.items():
        value = current.get(name)
        text = "" if value is None else value if isinstance(value, str) else json.dumps(value)
        label = name.replace("_", " ")
        if info.description:
            label = f"{label} ({info.description})"
        fields.append((name, label, text, not info.is_required(), name in MULTILINE))
    return fields


def submitted_arguments(values: dict[str, Any], model: type[BaseModel]) -> dict[str, str]:
    """The modal's text inputs by field; an empty optional input is left out (its default)."""
    arguments: dict[str, str] = {}
    for name in model.model_fields:
        text = ((values.get(name) or {}).get("value") or {}).get("value")
        if text:
            arguments[name] = text
    return arguments


def field_errors(message: str, fields: list[str]) -> dict[str, str]:
    """Slack wants errors keyed by block id: attach each problem to its field's input."""
    errors: dict[str, str] = {}
    for part in message.split("; "):
        name, _, text = part.partition(": ")
        key = name.split(".")[0] if name.split(".")[0] in fields else fields[0]
        errors[key] = (errors.get(key, "") + " " + (text or part)).strip()[:150]
    return errors
