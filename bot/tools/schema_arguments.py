"""Arguments described by a JSON schema rather than a pydantic model: an MCP server's tools.

The schema goes to the model as the server wrote it; what the model sends back is checked with
`jsonschema` (the validator the `mcp` SDK itself uses) before anything is shown or run, and the
problems are put in the same plain `field: problem` form as a pydantic tool's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import BaseModel, ConfigDict


class SchemaArguments(BaseModel):
    """Any JSON object; the tool's JSON schema has already decided whether it fits."""

    model_config = ConfigDict(extra="allow")


@dataclass(frozen=True)
class FieldSpec:
    """One argument as a person edits it: its name, a hint and whether it may be left out."""

    name: str
    description: str | None
    required: bool


def object_schema(schema: dict[str, Any] | None) -> dict[str, Any]:
    """The schema as the model's API wants it: always an object with properties."""
    shaped = dict(schema or {})
    shaped["type"] = "object"
    shaped.setdefault("properties", {})
    return shaped


def problems(schema: dict[str, Any], data: dict[str, Any]) -> list[str]:
    """Each way `data` misses the schema, as `field: problem`; empty when it fits."""
    try:
        validator = Draft202012Validator(schema)
        errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    except SchemaError as exc:
        return [f"arguments: the tool's own schema is invalid ({exc.message})"]
    found = []
    for error in errors[:10]:
        where = ".".join(str(p) for p in error.absolute_path) or "arguments"
        found.append(f"{where}: {error.message[:300]}")
    return found


def fields(schema: dict[str, Any]) -> list[FieldSpec]:
    required = set(schema.get("required") or [])
    properties = schema.get("properties") or {}
    return [
        FieldSpec(
            str(name),
            (spec.get("description") or spec.get("title")) if isinstance(spec, dict) else None,
            name in required,
        )
        for name, spec in properties.items()
    ]


def _kind(spec: Any) -> str | None:
    """A property's JSON type, looking through `anyOf`/`oneOf` (an optional field) for the
    first type that is not null."""
    if not isinstance(spec, dict):
        return None
    declared = spec.get("type")
    if isinstance(declared, str):
        return declared
    if isinstance(declared, list):
        return next((t for t in declared if t != "null"), None)
    for option in spec.get("anyOf") or spec.get("oneOf") or []:
        found = _kind(option)
        if found and found != "null":
            return found
    return None


def from_strings(schema: dict[str, Any], raw: dict[str, str]) -> dict[str, Any]:
    """Text typed in the Edit modal read back by each property's declared type: strings stay
    as typed; a list is JSON or comma-separated words (`bug, p1`); numbers, booleans and
    objects are read as JSON, or kept as text so the schema check names the field that does
    not fit."""
    properties = schema.get("properties") or {}
    data: dict[str, Any] = {}
    for name, text in raw.items():
        kind = _kind(properties.get(name))
        if kind in (None, "string"):
            data[name] = text
            continue
        try:
            data[name] = json.loads(text)
        except json.JSONDecodeError:
            data[name] = (
                [part.strip() for part in text.split(",") if part.strip()]
                if kind == "array"
                else text
            )
    return data
