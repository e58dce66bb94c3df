"""Arguments described by a JSON schema rather than a pydantic model: an MCP server's tools.

The schema goes to the model as the server wrote it; what the model sends back is checked with
`jsonschema` (the validator the `mcp` SDK itself uses) before anything is shown or run, and the
problems are put in the same plain `field: problem` form as a pydantic tool's. `jsonschema` is
imported when a schema is first checked: a bot without MCP servers never needs it.

A schema's regular expressions (`pattern`, `patternProperties`) come from the server, which may
be hostile: with Python's `re` one pattern of 25 characters held the event loop for a second,
twice as long with each character more. Here they run on the `regex` engine, which gives the
interpreter lock back while it matches and stops at a deadline: one validation spends at most
`PATTERN_SECONDS` on patterns in all, and a value that could not be checked in time is refused
with a plain problem ("the tool's pattern is too slow"), like any value that does not fit.
"""

from __future__ import annotations

import contextvars
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import regex
from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError

PATTERN_SECONDS = 0.25  # all of one validation's pattern matching
_deadline: contextvars.ContextVar[float] = contextvars.ContextVar("pattern_deadline", default=0.0)


class PatternTooSlow(Exception):
    pass


def _search(pattern: str, text: str) -> bool:
    """`pattern` found in `text`, within what is left of the validation's time; `PatternTooSlow`
    when it could not be decided in time, `regex.error` when the pattern is not one."""
    left = _deadline.get() - time.monotonic()
    if left <= 0:
        raise PatternTooSlow
    try:
        return regex.search(pattern, text, timeout=left, concurrent=True) is not None
    except TimeoutError:
        raise PatternTooSlow from None


def _unmatchable(pattern: str, exc: Exception) -> ValidationError:
    from jsonschema.exceptions import ValidationError

    if isinstance(exc, PatternTooSlow):
        return ValidationError(
            f"could not be checked against the tool's pattern {pattern[:100]!r} in time (the "
            "pattern is too slow to match); nothing was done"
        )
    return ValidationError(f"the tool's pattern {pattern[:100]!r} is not a usable regex")


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "string"):
        return
    try:
        found = _search(pattern, instance)
    except (PatternTooSlow, regex.error) as exc:
        yield _unmatchable(pattern, exc)
        return
    if not found:
        from jsonschema.exceptions import ValidationError

        yield ValidationError(f"{instance[:200]!r} does not match {pattern[:200]!r}")


def _matching(patterns: dict[str, Any], key: str) -> tuple[list[str], Exception | None, str]:
    hits: list[str] = []
    for pattern in patterns:
        try:
            if _search(pattern, key):
                hits.append(pattern)
        except (PatternTooSlow, regex.error) as exc:
            return hits, exc, pattern
    return hits, None, ""


def _pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object") or not isinstance(patterns, dict):
        return
    for key, value in instance.items():
        hits, failed, pattern = _matching(patterns, key)
        if failed is not None:
            yield _unmatchable(pattern, failed)
            return
        for hit in hits:
            yield from validator.descend(value, patterns[hit], path=key, schema_path=hit)


def _additional_properties(validator: Any, extra: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    extras = []
    for key in instance:
        if key in properties:
            continue
        hits, failed, pattern = _matching(patterns, key)
        if failed is not None:
            yield _unmatchable(pattern, failed)
            return
        if not hits:
            extras.append(key)
    if validator.is_type(extra, "object"):
        for key in extras:
            yield from validator.descend(instance[key], extra, path=key)
    elif not extra and extras:
        from jsonschema.exceptions import ValidationError

        names = ", ".join(repr(k)[:100] for k in sorted(extras)[:10])
        yield ValidationError(f"Additional properties are not allowed ({names} unexpected)")


# `unevaluatedProperties` would match `patternProperties` with `re` inside jsonschema: a schema
# with both is not checked with `re`, it is refused (`usable`).
@lru_cache(maxsize=1)
def _checker() -> Any:
    from jsonschema import Draft202012Validator, validators

    return validators.extend(  # type: ignore[no-untyped-call]
        Draft202012Validator,
        {
            "pattern": _pattern,
            "patternProperties": _pattern_properties,
            "additionalProperties": _additional_properties,
        },
    )


def _mentions(schema: Any, keyword: str) -> bool:
    if isinstance(schema, dict):
        return keyword in schema or any(_mentions(v, keyword) for v in schema.values())
    if isinstance(schema, list):
        return any(_mentions(v, keyword) for v in schema)
    return False


def usable(schema: dict[str, Any]) -> str | None:
    """Why a tool's input schema cannot be offered, or None: it must be a valid schema, and
    its patterns must be checkable off Python's backtracking `re`."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        return f"its input schema is invalid ({exc.message[:200]})"
    if _mentions(schema, "unevaluatedProperties") and _mentions(schema, "patternProperties"):
        return "its input schema mixes unevaluatedProperties with patternProperties"
    return None


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
    if _mentions(schema, "unevaluatedProperties") and _mentions(schema, "patternProperties"):
        return ["arguments: the tool's schema mixes unevaluatedProperties and patternProperties"]
    from jsonschema.exceptions import SchemaError

    checker = _checker()  # made (jsonschema imported) before the patterns' time starts
    token = _deadline.set(time.monotonic() + PATTERN_SECONDS)
    try:
        validator = checker(schema)
        errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    except SchemaError as exc:
        return [f"arguments: the tool's own schema is invalid ({exc.message})"]
    finally:
        _deadline.reset(token)
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
