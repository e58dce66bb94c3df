"""The Decline, Ask for changes and Edit modals' submissions: validated inline (Slack shows
the errors on the form, so the answer waits for them), authorised like a click by the one
door, then handed to the approvals service; an Edit's new revision is decided by the door
again. `ModalSubmissions` is a mixin of `Interactions` (bot/slack/interactions.py), which
owns the services named below and the authorisation (`_judged`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from slack_bolt.async_app import AsyncAck

from bot.approvals.questions import question_of
from bot.approvals.ruling import Authorise, Ruling, Step
from bot.approvals.service import ApprovalError, ApprovalsService, CardChanged
from bot.db.models import Proposal
from bot.errors import plain_error
from bot.membership import reach_of
from bot.metrics import DECISIONS
from bot.slack.card_publisher import CardPublisher
from bot.slack.card_rerouting import announce_reroute
from bot.slack.door_at_clicks import forbidden
from bot.slack.edit_form import edit_fields, placed, schema_of
from bot.slack.edit_reach import out_of_reach
from bot.slack.edit_values import read_submission
from bot.slack.edit_words import schema_errors
from bot.slack.note_forms import NOTE_MAX
from bot.slack.payloads import BadPayload, Submission, parse_submission
from bot.tasks import TaskGroup
from bot.tools.catalog import ToolRegistry
from bot.tools.registry import ToolArgumentsError, ToolContext

BAD_INPUT = "That button or form was not made by Countersign, so nothing changed."
EMPTY_NOTE = "Say what should change: the requester and the assistant act on this note."
LONG_NOTE = f"Keep the note to {NOTE_MAX} characters or fewer."


class ModalSubmissions:
    approvals: ApprovalsService
    registry: ToolRegistry
    cards: CardPublisher
    context: Callable[[Proposal], ToolContext]
    on_settled: Callable[[], None]
    tasks: TaskGroup

    door: Authorise

    async def _judged(
        self, proposal: Proposal, user: str, action: str
    ) -> tuple[Proposal, Ruling, str | None]:
        raise NotImplementedError  # Interactions' own

    async def _submitted(
        self, ack: AsyncAck, body: dict[str, Any], action: str, error_block: str
    ) -> tuple[Submission, Proposal] | None:
        try:
            form = parse_submission(body)
            proposal = await self.approvals.get(form.proposal_id)
        except BadPayload:
            DECISIONS.labels(action=action, result="bad_input").inc()
            await ack(response_action="errors", errors={error_block: BAD_INPUT})
            return None
        except ApprovalError as exc:
            await ack(response_action="errors", errors={error_block: exc.user_message[:150]})
            return None
        if form.revision != proposal.revision:
            await self.approvals.refuse(proposal.id, form.user, action, "the card changed")
            DECISIONS.labels(action=action, result="stale").inc()
            await ack(response_action="errors", errors={error_block: CardChanged().user_message})
            return None
        if action == "edit" and form.user == proposal.requester:
            return form, proposal
        proposal, _ruling, refusal = await self._judged(proposal, form.user, action)
        if refusal:
            await ack(response_action="errors", errors={error_block: refusal[:150]})
            return None
        return form, proposal

    async def submit_decline(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        submitted = await self._submitted(ack, body, "decline", "reason")
        if submitted is None:
            return
        form, proposal = submitted
        reason = (form.values.get("reason") or "").strip()[:1000] or None
        try:
            await self.approvals.decline(proposal.id, form.user, reason, form.revision)
        except ApprovalError as exc:
            await ack(response_action="errors", errors={"reason": exc.user_message[:150]})
            return
        DECISIONS.labels(action="decline", result="accepted").inc()
        await ack()
        self.cards.refresh(proposal.id)
        self.on_settled()

    async def submit_ask_changes(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        """The note is required (Slack checks it on the form too, but a payload is whatever
        was sent); the requester reads it in the thread before the model resumes with it."""
        submitted = await self._submitted(ack, body, "ask_changes", "note")
        if submitted is None:
            return
        form, proposal = submitted
        note = (form.values.get("note") or "").strip()
        if not note:
            await ack(response_action="errors", errors={"note": EMPTY_NOTE})
            return
        if len(note) > NOTE_MAX:
            await ack(response_action="errors", errors={"note": LONG_NOTE})
            return
        try:
            asked = await self.approvals.ask_changes(proposal.id, form.user, note, form.revision)
        except ApprovalError as exc:
            DECISIONS.labels(action="ask_changes", result="already_handled").inc()
            await ack(response_action="errors", errors={"note": exc.user_message[:150]})
            return
        DECISIONS.labels(action="ask_changes", result="accepted").inc()
        await ack()
        self.cards.refresh(proposal.id)
        self.tasks.spawn(self._changes_asked(asked), name=f"changes-{proposal.id}")

    async def _changes_asked(self, proposal: Proposal) -> None:
        await self.cards.note_changes_asked(proposal)
        self.on_settled()  # after the note, so the requester reads it before the new reply

    async def submit_edit(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        first_field = await body_first_field(body, self.registry, self.approvals)
        submitted = await self._submitted(ack, body, "edit", first_field)
        if submitted is None:
            return
        form, proposal = submitted
        tool = self.registry.get(proposal.tool_name)
        if tool is None or tool.preview is None or tool.internal:
            await ack()  # nothing to edit (any more, or here: a budget raise's own form)
            return
        # The modal showed this revision's arguments (the revision was checked above).
        fields = edit_fields(tool, proposal.arguments)
        on_form = placed(fields)
        first = next((f.name[:255] for f in fields if f.name in on_form), first_field)
        read = read_submission(form.state, fields, schema_of(tool))
        kept = {f: proposal.arguments[f] for f in read.unchanged if f in proposal.arguments}
        kinds = [f.kind for f in fields]
        reach = reach_of(self.cards.slack)
        unreachable = await out_of_reach(reach, fields, read.values, form.user)
        try:  # every field's problem at once: the schema's, and the form's over them
            arguments = tool.parse({**read.values, **kept})
            errors = {**read.errors, **unreachable}
        except ToolArgumentsError as exc:
            errors = {**schema_errors(str(exc), kinds, first), **read.errors, **unreachable}
        if errors:
            DECISIONS.labels(action="edit", result="bad_input").inc()
            await ack(response_action="errors", errors=errors)
            return
        try:
            preview = await tool.prepare(arguments, self.context(proposal))
        except ToolArgumentsError as exc:
            await ack(response_action="errors", errors=schema_errors(str(exc), kinds, first))
            return
        except Exception as exc:  # the target vanished, Slack said no, …: say so on the form
            await ack(response_action="errors", errors={first: plain_error(exc)[:150]})
            return
        revised = arguments.model_dump(mode="json")
        # The new revision is decided again by the one door: a deny refuses the edit (the card
        # keeps its revision), another ask reroutes the card.
        question = question_of(proposal, tool.pack, arguments=revised)
        ruling = await self.door(question, Step.EDIT, actor=form.user)
        if ruling.outcome == "deny":
            await self.approvals.refuse(proposal.id, form.user, "edit", forbidden(ruling))
            DECISIONS.labels(action="edit", result="refused").inc()
            await ack(response_action="errors", errors={first: forbidden(ruling)[:150]})
            return
        rerouted = ruling.reroutes(proposal.policy)
        try:
            edited = await self.approvals.edit(
                proposal.id,
                form.user,
                revised,
                preview,
                form.revision,
                (question, ruling),
            )
        except ApprovalError as exc:
            await ack(response_action="errors", errors={first: exc.user_message[:150]})
            return
        DECISIONS.labels(action="edit", result="accepted").inc()
        await ack()
        if rerouted:
            self.tasks.spawn(announce_reroute(self.cards, edited), name="reroute")
        self.cards.refresh(proposal.id)


async def body_first_field(
    body: dict[str, Any], registry: ToolRegistry, approvals: ApprovalsService
) -> str:
    """The block id of the edit form's first input, where general errors are shown."""
    try:
        form = parse_submission(body)
        proposal = await approvals.get(form.proposal_id)
    except (BadPayload, ApprovalError):
        return "title"
    tool = registry.get(proposal.tool_name)
    return next((spec.name for spec in tool.fields()), "title") if tool else "title"
