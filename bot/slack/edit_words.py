"""The Edit modal's problems in words, on the field they concern: "Choose a person", "Due date
must be a date", "Limit must be a whole number from 1 to 100" — never a schema's regular
expression or a validator's message about types."""

from __future__ import annotations

import re

from bot.tools.field_kinds import FieldKind, Kind

MISSING = "missing"
FOREIGN_BLOCK = "This form held a field Countersign did not make, so nothing changed."
MISSING_BLOCK = "This form came back without some of its fields, so nothing changed."
ERROR_MAX = 150
_REQUIRED = re.compile(r"^'([^']{1,255})' is a required property")
_CHOOSE = {
    Kind.USER: "Choose a person",
    Kind.USERS: "Choose people from this workspace",
    Kind.CHANNEL: "Choose a channel",
    Kind.CHANNELS: "Choose channels",
    Kind.CHOICE: "Choose one of the options",
}
_SHAPELESS = ("match", "pattern", "regex", "valid under", "is not of type", "should be a valid")


def _number(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else str(value)


def _range(kind: FieldKind) -> str:
    low, high = kind.minimum, kind.maximum
    if low is not None and high is not None:
        return f" from {_number(low)} to {_number(high)}"
    if low is not None:
        return f" of at least {_number(low)}"
    if high is not None:
        return f" of at most {_number(high)}"
    return ""


def _is_missing(problem: str) -> bool:
    lowered = problem.lower()
    return problem == MISSING or lowered == "field required" or "required property" in lowered


def _text_problem(kind: FieldKind, problem: str) -> str:
    label, lowered = kind.label, problem.lower()
    if lowered.startswith("value error, "):
        said = problem[len("value error, ") :]
        return f"{label}: {said}"
    if any(w in lowered for w in ("at most", "too long", "longer than")):
        if kind.max_length is not None:
            return f"{label} must be at most {kind.max_length:,} characters"
        return f"{label} is too long"
    if "at least 1 character" in lowered or "should be non-empty" in lowered:
        return f"{label} cannot be empty"
    if any(w in lowered for w in ("at least", "too short", "non-empty", "should be non")):
        return f"{label} is too short"
    if any(w in lowered for w in _SHAPELESS):
        if kind.kind is Kind.LIST:
            return f"{label} must be words separated by commas"
        return f"{label} is not in a form this tool accepts"
    return f"{label}: {problem}"  # the tool's own words ("wontfix not found in acme/api")


def in_words(kind: FieldKind, problem: str) -> str:
    """`problem` (the schema's or the reader's) as a sentence about `kind`'s field."""
    k, label = kind.kind, kind.label
    if k in _CHOOSE:
        return _CHOOSE[k]
    if k is Kind.DATE:
        return "Pick a date" if _is_missing(problem) else f"{label} must be a date"
    if k is Kind.DATETIME:
        return (
            "Pick a date and time" if _is_missing(problem) else f"{label} must be a date and time"
        )
    if k in (Kind.INTEGER, Kind.NUMBER):
        what = "a whole number" if k is Kind.INTEGER else "a number"
        return f"{label} must be {what}{_range(kind)}"
    if k is Kind.BOOLEAN:
        return f"{label}: tick the box or leave it empty"
    if _is_missing(problem):
        return f"{label} is required"
    return _text_problem(kind, problem)[:ERROR_MAX]


def schema_errors(message: str, kinds: list[FieldKind], first: str) -> dict[str, str]:
    """A tool's `field: problem; field: problem` message as Slack's errors, keyed by the
    block id of each field's (first) input; a problem no field owns goes on `first`."""
    by_name = {k.name: k for k in kinds}
    errors: dict[str, str] = {}
    for part in message.split("; "):
        where, _, problem = part.partition(": ")
        name = where.split(".")[0]
        required = _REQUIRED.match(problem)
        if name == "arguments" and required:
            name = required.group(1)
        kind = by_name.get(name)
        if kind is None:
            said = "These values do not fit what the tool accepts, so nothing changed."
            errors.setdefault(first, said)
            continue
        errors.setdefault(name[:255], in_words(kind, problem or part)[:ERROR_MAX])
    return errors
