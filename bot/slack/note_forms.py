"""The Decline and Ask for changes modals: a few words about the revision of a proposal its
card showed (the modal's metadata names both). A decline's reason is optional; a request for
changes is nothing without its note, so that one is required. The submissions are handled in
bot/slack/modal_submissions.py."""

from __future__ import annotations

from typing import Any

from slack_sdk.models.blocks import MarkdownTextObject, PlainTextObject, SectionBlock

from bot.slack.cards import ASK_CHANGES_MODAL, DECLINE_MODAL, SECTION_MAX, card_ref, safe

NOTE_MAX = 1000  # characters of a reason or a note (Slack enforces it on the form)


def _note_modal(
    callback_id: str, ref: str, description: str, words: tuple[str, str, str], block_id: str
) -> dict[str, Any]:
    """A modal asking for a few words about one revision of a proposal (`ref`), typed into
    the input `block_id` (a decline's reason is optional; an Ask for changes note is not)."""
    title, submit, label = words
    return {
        "type": "modal",
        "callback_id": callback_id,
        "private_metadata": ref,
        "title": PlainTextObject(text=title).to_dict(),
        "submit": PlainTextObject(text=submit).to_dict(),
        "close": PlainTextObject(text="Cancel").to_dict(),
        "blocks": [
            SectionBlock(text=MarkdownTextObject(text=safe(description, SECTION_MAX))).to_dict(),
            {
                "type": "input",
                "block_id": block_id,
                "optional": callback_id == DECLINE_MODAL,
                "label": {"type": "plain_text", "text": label},
                "element": {
                    "type": "plain_text_input",
                    "action_id": "value",
                    "multiline": True,
                    "max_length": NOTE_MAX,
                },
            },
        ],
    }


def decline_modal(proposal_id: int, revision: int, description: str) -> dict[str, Any]:
    words = ("Decline action", "Decline", "Why? (the assistant will read this)")
    ref = card_ref(proposal_id, revision)
    return _note_modal(DECLINE_MODAL, ref, description, words, "reason")


def ask_changes_modal(proposal_id: int, revision: int, description: str) -> dict[str, Any]:
    """The note is required: it is what the requester and the assistant act on."""
    words = (
        "Ask for changes",
        "Send",
        "What should change? (the requester and the assistant will read this)",
    )
    ref = card_ref(proposal_id, revision)
    return _note_modal(ASK_CHANGES_MODAL, ref, description, words, "note")
