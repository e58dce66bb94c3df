"""What kind of value each argument of a tool is, as a person reads and edits it: a Slack person,
a channel, a date, a choice, a number... and its label in words ("Due date", not `due_date`).

Read from the tool's JSON schema, so it serves built-in packs and MCP tools alike. A schema says
a string holds a Slack id with the extension `"x-slack": "user" | "channel"`, or by a pattern
that only Slack ids match (`^[UW]…`, `^[CG]…`); dates and times by `format`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Kind(StrEnum):
    USER = "user"
    USERS = "users"
    CHANNEL = "channel"
    CHANNELS = "channels"
    DATE = "date"
    DATETIME = "datetime"
    CHOICE = "choice"
    INTEGER = "integer"
    NUMBER = "number"
    BOOLEAN = "boolean"
    TEXT = "text"
    LIST = "list"  # a list of words (labels, logins)
    OTHER = "other"  # an object or a shape a form cannot offer: edited as JSON text


_USER_PATTERN = re.compile(r"^\^\[?[UW]")
_CHANNEL_PATTERN = re.compile(r"^\^\[?[CG]")
_ACRONYMS = {
    "id": "ID",
    "ids": "IDs",
    "url": "URL",
    "urls": "URLs",
    "api": "API",
    "sha": "SHA",
    "usd": "USD",
}
LONG_TEXT = 150  # a string that may be longer than this is edited in a multi-line box


@dataclass(frozen=True)
class FieldKind:
    """One argument as a person sees it."""

    name: str
    label: str
    kind: Kind
    required: bool
    description: str | None = None
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    max_length: int | None = None

    @property
    def multiline(self) -> bool:
        return self.kind is Kind.TEXT and (self.max_length is None or self.max_length > LONG_TEXT)


def label_of(name: str) -> str:
    """`due_date` → "Due date", `taskId` → "Task ID", `post_at` → "Post at"."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name).replace("_", " ").replace("-", " ")
    words = [w for w in spaced.split() if w]
    if not words:
        return name
    shown = [_ACRONYMS.get(w.lower(), w.lower()) for w in words]
    first = shown[0]
    shown[0] = first if first in _ACRONYMS.values() else first[:1].upper() + first[1:]
    return " ".join(shown)


def _options(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The non-null alternatives of an optional field (`anyOf: [X, null]`), or the spec."""
    options = spec.get("anyOf") or spec.get("oneOf")
    if isinstance(options, list):
        found = [o for o in options if isinstance(o, dict) and o.get("type") != "null"]
        if len(found) == 1:
            return [{**found[0], **{k: v for k, v in spec.items() if k not in ("anyOf", "oneOf")}}]
        return found
    return [spec]


def _type(spec: dict[str, Any]) -> str | None:
    declared = spec.get("type")
    if isinstance(declared, list):
        declared = next((t for t in declared if t != "null"), None)
    return declared if isinstance(declared, str) else None


def _slack_kind(spec: dict[str, Any]) -> str | None:
    marked = spec.get("x-slack")
    if marked in ("user", "channel"):
        return str(marked)
    pattern = spec.get("pattern")
    if isinstance(pattern, str):
        if _USER_PATTERN.match(pattern):
            return "user"
        if _CHANNEL_PATTERN.match(pattern):
            return "channel"
    return None


def _kind(spec: dict[str, Any]) -> tuple[Kind, dict[str, Any]]:
    options = _options(spec)
    if len(options) != 1:
        return Kind.OTHER, spec
    one = options[0]
    declared = _type(one)
    if isinstance(one.get("enum"), list) and all(isinstance(v, str) for v in one["enum"]):
        return Kind.CHOICE, one
    if declared == "string":
        slack = _slack_kind(one)
        if slack:
            return Kind(slack), one
        fmt = one.get("format")
        if fmt == "date":
            return Kind.DATE, one
        if fmt == "date-time":
            return Kind.DATETIME, one
        return Kind.TEXT, one
    if declared == "integer":
        return Kind.INTEGER, one
    if declared == "number":
        return Kind.NUMBER, one
    if declared == "boolean":
        return Kind.BOOLEAN, one
    if declared == "array":
        items = one.get("items")
        if isinstance(items, dict) and _type(items) == "string":
            slack = _slack_kind(items)
            if slack:
                return (Kind.USERS if slack == "user" else Kind.CHANNELS), one
            return Kind.LIST, one
    return Kind.OTHER, one


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def field_kind(name: str, spec: Any, required: bool) -> FieldKind:
    spec = spec if isinstance(spec, dict) else {}
    kind, one = _kind(spec)
    description = spec.get("description") or one.get("description")
    choices = tuple(one.get("enum") or ()) if kind is Kind.CHOICE else ()
    max_length = one.get("maxLength")
    return FieldKind(
        name=name,
        label=label_of(name),
        kind=kind,
        required=required,
        description=description if isinstance(description, str) else None,
        choices=choices,
        minimum=_number(one.get("minimum", one.get("exclusiveMinimum"))),
        maximum=_number(one.get("maximum", one.get("exclusiveMaximum"))),
        max_length=max_length if isinstance(max_length, int) else None,
    )


def field_kinds(schema: dict[str, Any] | None) -> list[FieldKind]:
    """Each property of an object schema, in the schema's order."""
    schema = schema or {}
    required = set(schema.get("required") or [])
    properties = schema.get("properties") or {}
    return [field_kind(str(n), s, n in required) for n, s in properties.items()]
