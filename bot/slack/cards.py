"""Approval cards: pure Block Kit builders (slack_sdk's models, which check Block Kit's limits
when serialised) and the action ids the buttons carry. Buttons carry only ids: the proposal's
and the revision of its arguments that the card shows (`42:3`), so a click approves what its
clicker saw and nothing else.

Everything that came from the model (descriptions, argument values) is escaped and clipped, so
a card stays within Slack's limits and pings nobody whatever the arguments hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    ButtonElement,
    ConfirmObject,
    ContextBlock,
    MarkdownTextObject,
    PlainTextObject,
    SectionBlock,
)

from bot.approvals.machine import State
from bot.text import escape

APPROVE = "proposal_approve"
DECLINE = "proposal_decline"
EDIT = "proposal_edit"
RETRY = "proposal_retry"
RETRY_CONFIRMED = "proposal_retry_confirmed"  # "Retry anyway", after a confirm dialog
DECLINE_MODAL = "proposal_decline_modal"
EDIT_MODAL = "proposal_edit_modal"

SECTION_MAX = 3000
FIELD_MAX = 2000
MAX_CHANGES = 20  # two sections of ten fields
FALLBACK_MAX = 2900


def clip(text: str, limit: int) -> str:
    """At most `limit` characters, never ending inside an `&amp;`-style entity."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    amp = cut.rfind("&")
    if amp != -1 and ";" not in cut[amp:]:
        cut = cut[:amp]
    return cut + "…"


def safe(text: str | None, limit: int) -> str:
    return clip(escape(text or ""), limit)


class BadValue(ValueError):
    """A button value or modal metadata that this app did not make."""


def card_ref(proposal_id: int, revision: int) -> str:
    return f"{proposal_id}:{revision}"


def parse_card_ref(value: object) -> tuple[int, int | None]:
    """`(proposal id, revision)` from a button value or modal metadata; `BadValue` for anything
    else (a crafted payload). A bare id (cards posted before revisions existed) has no revision."""
    if not isinstance(value, str) or len(value) > 40:
        raise BadValue("not a card reference")
    head, _, tail = value.partition(":")
    if not head.isdigit() or (tail and not tail.isdigit()) or len(head) > 18 or len(tail) > 9:
        raise BadValue("not a card reference")
    return int(head), (int(tail) if tail else None)


def slack_date(moment: datetime, fallback_format: str = "%Y-%m-%d %H:%M UTC") -> str:
    return f"<!date^{int(moment.timestamp())}^{{date_short_pretty}} {{time}}|" + (
        moment.strftime(fallback_format) + ">"
    )


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


def _change_field(change: dict[str, Any]) -> MarkdownTextObject:
    name = safe(str(change.get("field", "")), 100)
    old, new = change.get("old"), change.get("new")
    budget = (FIELD_MAX - len(name) - 20) // 2
    new_text = safe(str(new), budget) if new is not None else "_(empty)_"
    body = new_text if old is None else f"~{safe(str(old), budget)}~ → {new_text}"
    return MarkdownTextObject(text=f"*{name}*\n{body}")


def _buttons(view: CardView) -> ActionsBlock:
    value = card_ref(view.proposal_id, view.revision)
    approve = ButtonElement(
        text="Approve",
        action_id=APPROVE,
        value=value,
        style="primary",
        confirm=ConfirmObject(
            title="Approve this action?",
            text=clip(f"This cannot be undone: {escape(view.description)}", 300),
            confirm="Approve",
            deny="Cancel",
        )
        if view.destructive
        else None,
    )
    decline = ButtonElement(text="Decline", action_id=DECLINE, value=value, style="danger")
    edit = ButtonElement(text="Edit", action_id=EDIT, value=value)
    return ActionsBlock(block_id=f"proposal:{view.proposal_id}", elements=[approve, decline, edit])


def _status(view: CardView) -> list[Block]:
    state = view.state
    who = f"<@{view.decided_by}>" if view.decided_by else "someone"
    when = f" {slack_date(view.decided_at)}" if view.decided_at else ""
    if state is State.PROPOSED:
        lines = [f"Asked by <@{view.requester}> · expires {slack_date(view.expires_at)}"]
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
        retry = ButtonElement(
            text="Retry", action_id=RETRY, value=card_ref(view.proposal_id, view.revision)
        )
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
                    f"automatically: {escape(view.description)}. Retry only once you checked "
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
    changes = view.changes[:MAX_CHANGES]
    for start in range(0, len(changes), 10):
        blocks.append(SectionBlock(fields=[_change_field(c) for c in changes[start : start + 10]]))
    if len(view.changes) > MAX_CHANGES:
        more = len(view.changes) - MAX_CHANGES
        blocks.append(ContextBlock(elements=[MarkdownTextObject(text=f"…and {more} more")]))
    blocks += _status(view)
    fallback = clip(
        f"Approval needed: {escape(view.description)} ({view.state.value})", FALLBACK_MAX
    )
    return fallback, [b.to_dict() for b in blocks]


def decline_modal(proposal_id: int, revision: int, description: str) -> dict[str, Any]:
    return {
        "type": "modal",
        "callback_id": DECLINE_MODAL,
        "private_metadata": card_ref(proposal_id, revision),
        "title": PlainTextObject(text="Decline action").to_dict(),
        "submit": PlainTextObject(text="Decline").to_dict(),
        "close": PlainTextObject(text="Cancel").to_dict(),
        "blocks": [
            SectionBlock(text=MarkdownTextObject(text=safe(description, SECTION_MAX))).to_dict(),
            {
                "type": "input",
                "block_id": "reason",
                "optional": True,
                "label": {"type": "plain_text", "text": "Why? (the assistant will read this)"},
                "element": {
                    "type": "plain_text_input",
                    "action_id": "value",
                    "multiline": True,
                    "max_length": 1000,
                },
            },
        ],
    }


def edit_modal(
    proposal_id: int, revision: int, fields: list[tuple[str, str, str, bool, bool]]
) -> dict[str, Any]:
    """`fields`: (name, label, current value as text, optional, multiline)."""
    blocks: list[dict[str, Any]] = []
    for name, label, current, optional, multiline in fields[:45]:
        element: dict[str, Any] = {
            "type": "plain_text_input",
            "action_id": "value",
            "multiline": multiline,
        }
        if current:
            element["initial_value"] = current[:3000]
        blocks.append(
            {
                "type": "input",
                "block_id": name[:255],
                "optional": optional,
                "label": {"type": "plain_text", "text": clip(label, 2000)},
                "element": element,
            }
        )
    return {
        "type": "modal",
        "callback_id": EDIT_MODAL,
        "private_metadata": card_ref(proposal_id, revision),
        "title": PlainTextObject(text="Edit action").to_dict(),
        "submit": PlainTextObject(text="Save").to_dict(),
        "close": PlainTextObject(text="Cancel").to_dict(),
        "blocks": blocks,
    }
