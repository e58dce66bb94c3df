"""Approval cards: pure Block Kit builders (slack_sdk's models, which check Block Kit's limits
when serialised) and the action ids the buttons carry. Buttons carry only ids: the proposal's,
the revision of its arguments that the card shows and the digest of those arguments
(`42:3:1a2b3c4d5e`), so a click approves what its clicker saw and nothing else.

A card says everything once: the description, one list of fields (`card_fields`: each value as
it will be sent, under its label in words, old → new where the tool previews one; long values
one click away, `card_values`), then one context line with who asked, until when, and the
revision and digest the buttons carry. A card stays within Slack's limits, pings nobody the
model named, and hides nothing the write sends.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    ButtonElement,
    ConfirmObject,
    ContextBlock,
    MarkdownTextObject,
    SectionBlock,
)

from bot.approvals.escalation import ESCALATION
from bot.approvals.machine import State
from bot.provenance import Source
from bot.slack.card_fields import field_rows
from bot.slack.card_fields import slack_date as slack_date
from bot.slack.card_refs import BadValue as BadValue
from bot.slack.card_refs import ParsedRef as ParsedRef
from bot.slack.card_refs import card_ref as card_ref
from bot.slack.card_refs import parse_card_ref as parse_card_ref
from bot.slack.card_refs import parse_ref as parse_ref
from bot.slack.card_sources import reading_line
from bot.slack.card_text import clip as clip
from bot.slack.card_text import safe as safe
from bot.slack.card_values import CardRef, digest_of, field_blocks
from bot.states import state_label
from bot.text import escape
from bot.tools.field_kinds import FieldKind
from bot.tools.shown import shown_arguments
from bot.tools.shown_notes import Mentions

APPROVE = "proposal_approve"
# Approve and leave a grant (the rule's `grants:`); the names on the buttons are a contract.
APPROVE_GRANT = {
    "thread": "proposal_approve_thread",
    "channel": "proposal_approve_channel",
    "me": "proposal_approve_me",
}
GRANT_LABELS = {
    "thread": "Approve for this thread",
    "channel": "Approve for this channel",
    "me": "Always for me",
}
DECLINE = "proposal_decline"
ASK_CHANGES = "proposal_ask_changes"
EDIT = "proposal_edit"
RETRY = "proposal_retry"
RETRY_CONFIRMED = "proposal_retry_confirmed"  # "Retry anyway", after a confirm dialog
DECLINE_MODAL = "proposal_decline_modal"
ASK_CHANGES_MODAL = "proposal_ask_changes_modal"
EDIT_MODAL = "proposal_edit_modal"

SECTION_MAX = 3000
FALLBACK_MAX = 2900


@dataclass(frozen=True)
class CardView:
    """What a card shows, read from a proposal (kept apart from the ORM row)."""

    proposal_id: int
    revision: int
    state: State
    description: str
    changes: list[dict[str, Any]]
    requester: str
    expires_at: datetime
    approvers: list[str]
    approvals_required: int
    destructive: bool
    decided_by: str | None = None
    decided_at: datetime | None = None
    decline_reason: str | None = None
    result_summary: str | None = None
    result_link: str | None = None
    error: str | None = None
    finds_earlier_write: bool = False  # a retry finds the earlier write instead of repeating it
    # Whether the card offers Edit: a read asked on (no preview to make again) does not.
    editable: bool = True
    # The untrusted sources the turn had read before proposing it (`card_sources`).
    provenance: tuple[Source, ...] = ()
    # What the write sends (the revision's arguments) and how its destination reads mentions.
    arguments: dict[str, Any] | None = None
    arguments_hash: str = ""
    mentions: str = Mentions.UNKNOWN.value
    grants: tuple[str, ...] = ()  # scopes offered beyond once: thread, channel, me
    # Each argument's kind and label (`bot.tools.field_kinds`), by name; and the people the
    # arguments name, as `@name` (looked up by the publisher; never a pinging `<@U…>`).
    kinds: dict[str, FieldKind] = field(default_factory=dict)
    people: dict[str, str] = field(default_factory=dict)

    @property
    def digest(self) -> str:
        return digest_of(self.arguments_hash)

    @property
    def ref(self) -> str:
        return card_ref(self.proposal_id, self.revision, self.digest)


def decider(decided_by: str) -> str:
    """A person as a mention; a rule (`policy:NAME`) or a grant (`grant:ID`) as code."""
    if decided_by == ESCALATION:
        return "the policy's escalation (nobody answered)"
    return f"`{safe(decided_by, 100)}`" if ":" in decided_by else f"<@{decided_by}>"


def _provenance(view: CardView) -> list[Block]:
    """One context line: what the turn read before proposing this, so an approver sees when
    text from outside (a teammate, a guest, a file, an issue) could have steered it."""
    line = reading_line(view.provenance, view.people)
    if line is None:
        return []
    return [ContextBlock(elements=[MarkdownTextObject(text=line)])]


def _approve_button(view: CardView, text: str, action_id: str, primary: bool) -> ButtonElement:
    return ButtonElement(
        text=text,
        action_id=action_id,
        value=view.ref,
        style="primary" if primary else None,
        confirm=ConfirmObject(
            title="Approve this action?",
            text=clip(f"This cannot be undone: {safe(view.description, 300)}", 300),
            confirm="Approve",
            deny="Cancel",
        )
        if view.destructive
        else None,
    )


def _buttons(view: CardView) -> ActionsBlock:
    value = view.ref
    approve = [_approve_button(view, "Approve once" if view.grants else "Approve", APPROVE, True)]
    approve += [
        _approve_button(view, GRANT_LABELS[scope], APPROVE_GRANT[scope], False)
        for scope in view.grants
    ]
    decline = ButtonElement(text="Decline", action_id=DECLINE, value=value, style="danger")
    changes = ButtonElement(text="Ask for changes", action_id=ASK_CHANGES, value=value)
    edit = ButtonElement(text="Edit", action_id=EDIT, value=value)
    elements = [*approve, decline, changes, *([edit] if view.editable else [])]
    return ActionsBlock(block_id=f"proposal:{view.proposal_id}", elements=elements)


def _about(view: CardView, expiry: bool = True) -> str:
    """The card's one context line: who asked, until when, and the revision and digest of the
    arguments shown (what the buttons carry, so a click counts for these and no others)."""
    expires = f" · expires {slack_date(view.expires_at)}" if expiry else ""
    return (
        f"Asked by <@{view.requester}>{expires} · revision {view.revision} · digest `{view.digest}`"
    )


def _status(view: CardView) -> list[Block]:
    state = view.state
    who = decider(view.decided_by) if view.decided_by else "someone"
    when = f" {slack_date(view.decided_at)}" if view.decided_at else ""
    if state is State.PROPOSED:
        lines = [_about(view)]
        if view.approvals_required > 1 or view.approvers:
            names = ", ".join(f"<@{a}>" for a in view.approvers) or "nobody yet"
            lines.append(
                f"Approved by {names} ({len(view.approvers)} of {view.approvals_required})"
            )
        return [
            ContextBlock(elements=[MarkdownTextObject(text=line) for line in lines]),
            _buttons(view),
        ]
    if state is State.DECLINED:
        reason = f": {safe(view.decline_reason, 1500)}" if view.decline_reason else ""
        text = f":no_entry_sign: *Declined* by {who}{when}{reason}"
    elif state is State.EXPIRED and view.decided_by == ESCALATION:
        text = (
            ":hourglass: *Nobody answered*: the policy's escalation ended the wait"
            f"{when}, so nothing was done."
        )
    elif state is State.CHANGES_ASKED:
        note = safe(view.decline_reason, 1500) or "no note"
        text = (
            f":pencil2: *Changes asked* by {who}: {note}\n_Sent back{when}, so nothing was "
            "done; the assistant may propose a revised action._"
        )
    elif state is State.EXPIRED:
        text = ":hourglass: *Expired*: nobody approved it in time, so nothing was done."
    elif state is State.WITHDRAWN:
        text = (
            f":octagonal_sign: *Withdrawn*: {who} stopped the turn{when} before anyone "
            "decided, so nothing was done."
        )
    elif state is State.APPROVED:
        text = f":white_check_mark: *Approved* by {who}{when}; starting…"
    elif state is State.EXECUTING:
        text = f":white_check_mark: Approved by {who}{when} · :gear: *Executing…*"
    elif state is State.SUCCEEDED:
        link = f" <{escape(view.result_link)}|Open>" if view.result_link else ""
        text = (
            f":white_check_mark: Approved by {who}{when} · *Done*: "
            f"{safe(view.result_summary or 'completed', 1500)}{link}"
        )
    elif state is State.UNKNOWN:
        return _unknown(view)
    else:  # failed
        text = f":x: *Failed*: {safe(view.error, 2000)}"
        retry = ButtonElement(text="Retry", action_id=RETRY, value=view.ref)
        return [
            SectionBlock(text=MarkdownTextObject(text=clip(text, SECTION_MAX))),
            ActionsBlock(block_id=f"proposal:{view.proposal_id}:retry", elements=[retry]),
        ]
    return [SectionBlock(text=MarkdownTextObject(text=clip(text, SECTION_MAX)))]


def _unknown(view: CardView) -> list[Block]:
    """The write may have happened: say so, say what to check, and make a Retry that could
    write twice ask for confirmation first."""
    text = (
        ":warning: *Outcome unknown*: this may have been carried out. "
        f"{safe(view.error, 1500)}\nCheck the destination before retrying."
    )
    value = card_ref(view.proposal_id, view.revision)
    if view.finds_earlier_write:
        retry = ButtonElement(text="Retry", action_id=RETRY, value=value)
    else:
        retry = ButtonElement(
            text="Retry anyway…",
            action_id=RETRY_CONFIRMED,
            value=value,
            style="danger",
            confirm=ConfirmObject(
                title="It may write twice",
                text=clip(
                    "The first attempt may already have done this, and it cannot be looked up "
                    f"automatically: {safe(view.description, 200)}. Retry only once you checked "
                    "it did not happen.",
                    300,
                ),
                confirm="Retry anyway",
                deny="Cancel",
            ),
        )
    return [
        SectionBlock(text=MarkdownTextObject(text=clip(text, SECTION_MAX))),
        ActionsBlock(block_id=f"proposal:{view.proposal_id}:retry", elements=[retry]),
    ]


def approval_card(view: CardView) -> tuple[str, list[dict[str, Any]]]:
    """The fallback text and the blocks of a card in its current state."""
    title = f":raised_hand: *Approval needed*: {safe(view.description, SECTION_MAX - 40)}"
    blocks: list[Block] = [SectionBlock(text=MarkdownTextObject(text=title))]
    arguments = view.arguments or {}
    values = shown_arguments(arguments, Mentions(view.mentions))
    rows = field_rows(values, arguments, view.changes, view.kinds, view.people)
    blocks += field_blocks(rows, CardRef(view.proposal_id, view.revision, view.digest))
    blocks += _provenance(view) + _status(view)
    if view.state is not State.PROPOSED:
        about = _about(view, expiry=False)
        blocks.append(ContextBlock(elements=[MarkdownTextObject(text=about)]))
    fallback = clip(
        f"Approval needed: {safe(view.description, FALLBACK_MAX)} ({state_label(view.state)})",
        FALLBACK_MAX,
    )
    return fallback, [b.to_dict() for b in blocks]
