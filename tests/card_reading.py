"""The approval card read as a person reads it: each field's label and what it shows, old → new
where it has an old value, "(means …)" where the tool's preview says more than the value."""

from __future__ import annotations

from typing import Any

from tests.fakes.slack import StoredMessage


def _field(label_text: str, value: str) -> tuple[str, str]:
    head, *rest = label_text.split("\n")
    label = head.split("*")[1] if head.startswith("*") else head
    old = next((line for line in rest if line.startswith("~") and line.endswith("→")), "")
    means = next((line.removeprefix("_means_ ") for line in rest if line.startswith("_means_")), "")
    shown = f"{old} {value}" if old else value
    return label, shown + (f" (means {means})" if means else "")


def _text(block: dict[str, Any]) -> dict[str, Any]:
    return dict(block.get("text") or {})


def card_fields(card: StoredMessage) -> dict[str, str]:
    """Label → what the card shows for it (a long value: its part on the card)."""
    found: dict[str, str] = {}
    blocks = card.blocks or []
    for index, block in enumerate(blocks):
        if block["type"] != "section":
            continue
        fields = block.get("fields") or []
        for label, value in zip(fields[::2], fields[1::2], strict=True):
            key, shown = _field(label["text"], value["text"])
            found[key] = shown
        text = _text(block)
        if text.get("type") == "mrkdwn" and text["text"].startswith("*"):
            after = _text(blocks[index + 1]) if index + 1 < len(blocks) else {}
            value = after["text"] if after.get("type") == "plain_text" else ""
            key, shown = _field(text["text"], value)
            found[key] = shown
    return found
