"""The Edit modal: a tool's arguments as typed controls read from its JSON schema (a person
picker for a person, a date picker for a date, a menu for a choice...; bot/slack/edit_elements),
each labelled in words, each showing the card's current value.

Text is edited as before, and nothing is cut silently. A value longer than one input holds
(Slack: 3,000 characters) is edited in parts, several inputs joined back in order; a value the
modal has no room for at all is shown with the reason and kept as it is. What comes back is read
in bot/slack/edit_values.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from slack_sdk.models.blocks import MarkdownTextObject, PlainTextObject, SectionBlock

from bot.slack.cards import EDIT_MODAL
from bot.slack.edit_elements import ACTION, clear_element, shows, typed_element
from bot.text import escape
from bot.tools.field_kinds import FieldKind, Kind, field_kinds
from bot.tools.invisible import hidden_count
from bot.tools.registry import Tool

MULTILINE = {"description", "body", "text"}
LONG_LINE = 150  # a value longer than this is edited in a multi-line box
INPUT_MAX = 3000  # a plain_text_input holds at most this many characters
MODAL_BLOCKS = 100
MAX_FIELDS = MODAL_BLOCKS - 1  # one block left to say that the rest cannot be edited here
CLEAR = "clear"  # the block id suffix of an optional date's "leave it empty" box


@dataclass(frozen=True)
class EditField:
    kind: FieldKind
    value: Any  # the card's current value
    typed: bool  # shown with a typed control; False: as text
    clearable: bool = False  # may be left empty (null, or absent with no default)

    @property
    def name(self) -> str:
        return self.kind.name

    @property
    def label(self) -> str:
        return self.kind.label

    @property
    def optional(self) -> bool:
        return not self.kind.required

    @property
    def text(self) -> str:
        """The current value as a text input shows it."""
        return as_text(self.value)

    @property
    def multiline(self) -> bool:
        long_kind = self.kind.kind is Kind.TEXT and (
            self.kind.max_length is None or self.kind.max_length > 1000
        )
        text = self.text
        return self.name in MULTILINE or long_kind or len(text) > LONG_LINE or "\n" in text

    @property
    def clearable_date(self) -> bool:
        return self.typed and self.clearable and self.kind.kind in (Kind.DATE, Kind.DATETIME)


def as_text(value: Any) -> str:
    return "" if value is None else value if isinstance(value, str) else json.dumps(value)


def schema_of(tool: Tool[Any]) -> dict[str, Any]:
    """The tool's argument schema: an MCP tool's own, a built-in tool's from its model."""
    return tool.input_schema or tool.arguments.model_json_schema()


def _clearable(kind: FieldKind, spec: Any) -> bool:
    """Whether an argument may be left empty: optional, and null or no default when empty
    (an optional choice with a default, like a priority, is not emptied but chosen)."""
    if kind.required or not isinstance(spec, dict):
        return False
    options = spec.get("anyOf") or spec.get("oneOf") or []
    declared = spec.get("type")
    nullable = (isinstance(declared, list) and "null" in declared) or any(
        isinstance(o, dict) and o.get("type") == "null" for o in options
    )
    return nullable or spec.get("default") is None


def edit_fields(tool: Tool[Any], current: dict[str, Any]) -> list[EditField]:
    schema = schema_of(tool)
    properties = schema.get("properties") or {}
    return [
        EditField(
            kind,
            current.get(kind.name),
            shows(kind, current.get(kind.name)),
            _clearable(kind, properties.get(kind.name)),
        )
        for kind in field_kinds(schema)
    ]


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


def blocks_needed(field: EditField) -> int:
    if field.typed:
        return 2 if field.clearable_date else 1
    return len(parts_of(field.text))


def _hint(field: EditField, text: str) -> str | None:
    hidden = hidden_count(text) if not field.typed else 0
    if hidden:
        return (
            f"Holds {hidden} invisible or formatting character(s); the card shows them as "
            "[U+…] codes."
        )
    if not field.typed and field.kind.kind in (Kind.TEXT, Kind.LIST):
        return field.kind.description  # the tool's own words for it; typed kinds need none
    return None


def _block(field: EditField, element: dict[str, Any], block_id: str, label: str) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "input",
        "block_id": block_id[:255],
        "optional": field.optional,
        "label": PlainTextObject(text=label[:2000]).to_dict(),
        "element": element,
    }
    return block


def _text_inputs(field: EditField) -> list[dict[str, Any]]:
    parts = parts_of(field.text)
    blocks = []
    for index, text in enumerate(parts):
        element: dict[str, Any] = {
            "type": "plain_text_input",
            "action_id": ACTION,
            "multiline": field.multiline or len(parts) > 1,
            "max_length": INPUT_MAX,
        }
        if text:
            element["initial_value"] = text
        label = field.label
        if len(parts) > 1:
            label = f"{field.label} (part {index + 1} of {len(parts)})"
        block = _block(field, element, part_id(field.name, index), label)
        block["optional"] = field.optional or len(parts) > 1
        hint = _hint(field, text)
        if hint:
            block["hint"] = PlainTextObject(text=hint[:2000]).to_dict()
        blocks.append(block)
    return blocks


def inputs_of(field: EditField) -> list[dict[str, Any]]:
    if not field.typed:
        return _text_inputs(field)
    element = typed_element(field.kind, field.value, field.clearable)
    blocks = [_block(field, element, field.name, field.label)]
    if field.kind.kind is Kind.BOOLEAN:
        blocks[0]["optional"] = True  # an empty checkbox is an answer: No
    if field.clearable_date:
        blocks.append(
            _block(field, clear_element(), f"{field.name}::{CLEAR}", f"No {field.label.lower()}")
        )
        blocks[-1]["optional"] = True
    return blocks


def placed(fields: list[EditField]) -> set[str]:
    """The fields the modal has inputs for: all of them unless some are too long to fit with
    the rest (each field takes one block at least)."""
    names: set[str] = set()
    used = 0
    fields = fields[:MAX_FIELDS]
    for position, field in enumerate(fields):
        needed = blocks_needed(field)
        if needed <= MAX_FIELDS - used - (len(fields) - position - 1):
            names.add(field.name)
            used += needed
        else:
            used += 1
    return names


def edit_modal(proposal_ref: str, fields: list[EditField]) -> dict[str, Any]:
    """Every field as its control; a long text in parts of `INPUT_MAX`, read back joined."""
    blocks: list[dict[str, Any]] = []
    on_form = placed(fields)
    for field in fields[:MAX_FIELDS]:
        if field.name not in on_form:
            why = (
                f"*{escape(field.label)}* is {len(field.text):,} characters, more than this "
                "form can hold with the other fields, so it cannot be edited here and stays "
                "exactly as it is. Ask the assistant to change it instead."
            )
            blocks.append(SectionBlock(text=MarkdownTextObject(text=why[:3000])).to_dict())
            continue
        blocks += inputs_of(field)
    if len(fields) > MAX_FIELDS:
        rest = ", ".join(f.label for f in fields[MAX_FIELDS:])
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
