"""The Edit modal's fields: a tool's argument model shown as text inputs, and typed text read
back into arguments (validated again by the tool before anything changes)."""

from __future__ import annotations

import json
from typing import Any

from bot.tools.schema_arguments import FieldSpec

MULTILINE = {"description", "body", "text"}


def edit_fields(
    specs: list[FieldSpec], current: dict[str, Any]
) -> list[tuple[str, str, str, bool, bool]]:
    fields = []
    for spec in specs:
        value = current.get(spec.name)
        text = "" if value is None else value if isinstance(value, str) else json.dumps(value)
        label = spec.name.replace("_", " ")
        if spec.description:
            label = f"{label} ({spec.description})"[:2000]
        fields.append((spec.name, label, text, not spec.required, spec.name in MULTILINE))
    return fields


def submitted_arguments(values: dict[str, str], specs: list[FieldSpec]) -> dict[str, str]:
    """The modal's text inputs by field; an empty optional input is left out (its default)."""
    return {spec.name: values[spec.name] for spec in specs if values.get(spec.name)}


def field_errors(message: str, fields: list[str]) -> dict[str, str]:
    """Slack wants errors keyed by block id: attach each problem to its field's input."""
    errors: dict[str, str] = {}
    for part in message.split("; "):
        name, _, text = part.partition(": ")
        key = name.split(".")[0] if name.split(".")[0] in fields else fields[0]
        errors[key] = (errors.get(key, "") + " " + (text or part)).strip()[:150]
    return errors
