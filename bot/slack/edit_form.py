"""The Edit modal: a tool's arguments as text inputs, and typed text read back into arguments
(validated again by the tool before anything changes).

Nothing is cut silently. A value longer than one input holds (Slack: 3,000 characters) is
edited in parts, several inputs joined back in order; a value the modal has no room for at all
is shown with the reason and kept as it is. A field whose text comes back as the modal showed it
keeps its approved value byte for byte (the text is not parsed again).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from slack_sdk.models.blocks import MarkdownTextObject, PlainTextObject, SectionBlock

from bot.slack.cards import EDIT_MODAL
from bot.text import escape
from bot.tools.invisible import hidden_count
from bot.tools.schema_arguments import FieldSpec

MULTILINE = {"description", "body", "text"}
INPUT_MAX = 3000  # a plain_text_input holds at most this many characters
MODAL_BLOCKS = 100
MAX_FIELDS = MODAL_BLOCKS - 1  # one block left to say that the rest cannot be edited here


@dataclass(frozen=True)
class EditField:
    name: str
    label: str
    text: str  # the current value as the modal shows it
    optional: bool
    multiline: bool


def as_text(value: Any) -> str:
    return "" if value is None else value if isinstance(value, str) else json.dumps(value)


def edit_fields(specs: list[FieldSpec], current: dict[str, Any]) -> list[EditField]:
    fields = []
    for spec in specs:
        label = spec.name.replace("_", " ")
        if spec.description:
            label = f"{label} ({spec.description})"
        multiline = spec.name in MULTILINE or len(as_text(current.get(spec.name))) > 150
        fields.append(
            EditField(
                spec.name,
                label[:2000],
                as_text(current.get(spec.name)),
                not spec.required,
                multiline,
            )
        )
    return fields


def parts_of(text: str) -> list[str]:
    """`text` in pieces an input holds (Slack counts UTF-16 units: an emoji takes two)."""
    if len(text) <= INPUT_MAX // 2:
        return [text]
    parts: list[str] = []
    start = used = 0
    for index, char in enumerate(text):
        width = 2 if ord(char) > 0xFFFF else 1
        if used + width > INPUT_MAX:
            parts.append(text[start:index])
            start, used = index, 0
        used += width
    parts.append(text[start:])
    return parts


def part_id(name: str, index: int) -> str:
    """The block id of a field's `index`th input (the first keeps the field's name, so errors
    attach to it)."""
    return name if index == 0 else f"{name}::{index + 1}"


def _input(field: EditField, text: str, index: int, count: int) -> dict[str, Any]:
    element: dict[str, Any] = {
        "type": "plain_text_input",
        "action_id": "value",
        "multiline": field.multiline or count > 1,
        "max_length": INPUT_MAX,
    }
    if text:
        element["initial_value"] = text
    label = field.label if count == 1 else f"{field.label} (part {index + 1} of {count})"
    block: dict[str, Any] = {
        "type": "input",
        "block_id": part_id(field.name, index)[:255],
        "optional": field.optional or count > 1,
        "label": {"type": "plain_text", "text": label[:2000]},
        "element": element,
    }
    hidden = hidden_count(text)
    if hidden:
        block["hint"] = {
            "type": "plain_text",
            "text": f"Holds {hidden} invisible or formatting character(s); the card shows them "
            "as [U+…] codes.",
        }
    return block


def placed(fields: list[EditField]) -> set[str]:
    """The fields the modal has inputs for: all of them unless some are too long to fit with
    the rest (each field takes one block at least)."""
    names: set[str] = set()
    used = 0
    fields = fields[:MAX_FIELDS]
    for position, field in enumerate(fields):
        needed = len(parts_of(field.text))
        if needed <= MAX_FIELDS - used - (len(fields) - position - 1):
            names.add(field.name)
            used += needed
        else:
            used += 1
    return names


def edit_modal(proposal_ref: str, fields: list[EditField]) -> dict[str, Any]:
    """Every field as inputs; a long one in parts of `INPUT_MAX`, read back joined."""
    blocks: list[dict[str, Any]] = []
    on_form = placed(fields)
    for field in fields[:MAX_FIELDS]:
        parts = parts_of(field.text)
        if field.name not in on_form:
            why = (
                f"*{escape(field.name)}* is {len(field.text):,} characters, more than this "
                "form can hold with the other fields, so it cannot be edited here and stays "
                "exactly as it is. Ask the assistant to change it instead."
            )
            blocks.append(SectionBlock(text=MarkdownTextObject(text=why[:3000])).to_dict())
            continue
        blocks += [_input(field, text, i, len(parts)) for i, text in enumerate(parts)]
    if len(fields) > MAX_FIELDS:
        rest = ", ".join(f.name for f in fields[MAX_FIELDS:])
        why = f"These fields cannot be edited here and stay exactly as they are: {rest}"
        blocks.append(SectionBlock(text=MarkdownTextObject(text=escape(why)[:3000])).to_dict())
    return {
        "type": "modal",
        "callback_id": EDIT_MODAL,
        "private_metadata": proposal_ref,
        "title": PlainTextObject(text="Edit action").to_dict(),
        "submit": PlainTextObject(text="Save").to_dict(),
        "close": PlainTextObject(text="Cancel").to_dict(),
        "blocks": blocks,
    }


def _same(typed: str, shown: str) -> bool:
    """Whether `typed` is `shown` come back unchanged (Slack may normalise line ends and
    trailing blanks of what it sends back)."""
    if typed == shown:
        return True

    def norm(text: str) -> str:
        lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        return "\n".join(line.rstrip() for line in lines).strip()

    return norm(typed) == norm(shown)


@dataclass(frozen=True)
class Submitted:
    texts: dict[str, str]  # the fields' typed text (empty optional fields left out)
    unchanged: set[str]  # fields that came back as shown: keep their value as it is


def submitted_arguments(values: dict[str, str], fields: list[EditField]) -> Submitted:
    """The modal's inputs joined back per field, and which fields came back unchanged (a field
    the modal could not hold has no input and is unchanged)."""
    texts: dict[str, str] = {}
    unchanged: set[str] = set()
    on_form = placed(fields)
    for field in fields:
        if field.name not in on_form:
            unchanged.add(field.name)  # no input for it: kept as it is
            continue
        count = len(parts_of(field.text))
        typed = "".join(values.get(part_id(field.name, i), "") for i in range(count))
        if _same(typed, field.text):
            unchanged.add(field.name)
        if typed:
            texts[field.name] = typed
    return Submitted(texts, unchanged)


def field_errors(message: str, fields: list[str]) -> dict[str, str]:
    """Slack wants errors keyed by block id: attach each problem to its field's input."""
    errors: dict[str, str] = {}
    for part in message.split("; "):
        name, _, text = part.partition(": ")
        key = name.split(".")[0] if name.split(".")[0] in fields else fields[0]
        errors[key] = (errors.get(key, "") + " " + (text or part)).strip()[:150]
    return errors
