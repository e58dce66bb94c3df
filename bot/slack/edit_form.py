"""The Edit modal's fields: a tool's argument model shown as text inputs, and typed text read
back into arguments (validated again by the tool before anything changes)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

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


def submitted_arguments(values: dict[str, str], model: type[BaseModel]) -> dict[str, str]:
    """The modal's text inputs by field; an empty optional input is left out (its default)."""
    return {name: values[name] for name in model.model_fields if values.get(name)}


def field_errors(message: str, fields: list[str]) -> dict[str, str]:
    """Slack wants errors keyed by block id: attach each problem to its field's input."""
    errors: dict[str, str] = {}
    for part in message.split("; "):
        name, _, text = part.partition(": ")
        key = name.split(".")[0] if name.split(".")[0] in fields else fields[0]
        errors[key] = (errors.get(key, "") + " " + (text or part)).strip()[:150]
    return errors
