"""The Edit modal's submission read back into arguments, field by field, in Slack's documented
state shapes (`selected_user`, `selected_conversation`, `selected_date` "YYYY-MM-DD",
`selected_date_time` in unix seconds, `selected_option`, a number's `value` text, checkboxes'
`selected_options`), and every problem said in words on its own field.

The payload is whatever was sent: each value is read by the kind of field the modal offered
(never by the type the payload claims), a value the control could not have produced (a choice
not on the menu, a number out of range, a block the modal did not have, one of its blocks left
out, which would empty that field) is refused on its field, and the schema still checks the
result before anything changes.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from bot.slack.edit_elements import SLACK_CHANNEL, SLACK_USER, as_date, as_datetime, none_value
from bot.slack.edit_form import CLEAR, EditField, part_id, parts_of, placed
from bot.slack.edit_words import FOREIGN_BLOCK, MISSING, MISSING_BLOCK, in_words
from bot.tools.field_kinds import Kind
from bot.tools.schema_arguments import from_strings

# A number box's text: digits (a float written out in full may have hundreds of them).
INTEGER = re.compile(r"^-?\d{1,400}$")
DECIMAL = re.compile(r"^-?\d{1,400}(\.\d{1,400})?([eE][-+]?\d{1,3})?$")


class Unreadable(ValueError):
    """The value is not one the field's control could have sent."""


@dataclass(frozen=True)
class Submitted:
    values: dict[str, Any]  # each field's new value (cleared optional fields left out)
    unchanged: set[str]  # fields that came back as shown: keep their value as it is
    errors: dict[str, str] = field(default_factory=dict)  # block id -> the problem in words


def _same(typed: str, shown: str) -> bool:
    """Whether `typed` is `shown` come back unchanged (Slack may normalise line ends and
    trailing blanks of what it sends back)."""
    if typed == shown:
        return True

    def norm(text: str) -> str:
        lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        return "\n".join(line.rstrip() for line in lines).strip()

    return norm(typed) == norm(shown)


def _ids(found: Any, pattern: re.Pattern[str]) -> list[str]:
    if not isinstance(found, list) or not all(
        isinstance(v, str) and pattern.match(v) for v in found
    ):
        raise Unreadable
    return list(dict.fromkeys(found))


def _one(
    entry: dict[str, Any], single: tuple[str, ...], multi: str, pattern: re.Pattern[str]
) -> Any:
    for key in single:
        if key in entry:
            value = entry[key]
            if value is None:
                return None
            if not isinstance(value, str) or not pattern.match(value):
                raise Unreadable
            return value
    chosen = _ids(entry.get(multi) or [], pattern)
    if len(chosen) > 1:
        raise Unreadable
    return chosen[0] if chosen else None


def _number(f: EditField, text: Any) -> int | float | None:
    if text is None or text == "":
        return None
    whole = f.kind.kind is Kind.INTEGER
    if not isinstance(text, str) or not (INTEGER if whole else DECIMAL).match(text.strip()):
        raise Unreadable
    number: int | float = int(text) if whole else float(text)
    if not whole and float(number).is_integer() and not re.search(r"[.eE]", text):
        number = int(text)
    if not math.isfinite(number):
        raise Unreadable
    low, high = f.kind.minimum, f.kind.maximum
    if (low is not None and number < low) or (high is not None and number > high):
        raise Unreadable
    return number


def _date_time(f: EditField, seconds: Any) -> str | None:
    """Unix seconds as ISO 8601 in the zone of the value the card had (UTC, written `Z`,
    when it had none)."""
    if seconds is None:
        return None
    if not isinstance(seconds, int) or isinstance(seconds, bool):
        raise Unreadable
    shown = as_datetime(f.value)
    zone = shown.tzinfo if shown is not None else UTC
    try:
        when = datetime.fromtimestamp(seconds, tz=zone)
    except (OverflowError, OSError, ValueError):
        raise Unreadable from None
    if shown is not None and int(shown.timestamp()) == seconds:
        return str(f.value)  # unchanged: the card's own text, its zone and seconds kept
    text = when.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def _typed(f: EditField, entry: dict[str, Any]) -> Any:
    k = f.kind.kind
    if k is Kind.USER:
        return _one(entry, ("selected_user",), "selected_users", SLACK_USER)
    if k is Kind.CHANNEL:
        single = ("selected_conversation", "selected_channel")
        return _one(entry, single, "selected_conversations", SLACK_CHANNEL)
    if k is Kind.USERS:
        return _ids(entry.get("selected_users") or [], SLACK_USER)
    if k is Kind.CHANNELS:
        return _ids(entry.get("selected_conversations") or [], SLACK_CHANNEL)
    if k is Kind.DATE:
        picked = entry.get("selected_date")
        if picked is not None and as_date(picked) is None:
            raise Unreadable
        return picked
    if k is Kind.DATETIME:
        return _date_time(f, entry.get("selected_date_time"))
    if k is Kind.CHOICE:
        option = entry.get("selected_option")
        if option is None:
            return None
        value = option.get("value") if isinstance(option, dict) else None
        if f.clearable and value == none_value(f.kind):
            return None
        if value not in f.kind.choices:
            raise Unreadable
        return value
    if k in (Kind.INTEGER, Kind.NUMBER):
        return _number(f, entry.get("value"))
    return _ticked(entry, "true")  # Kind.BOOLEAN


def _ticked(entry: dict[str, Any], value: str) -> bool:
    options = entry.get("selected_options") or []
    if not isinstance(options, list) or not all(isinstance(o, dict) for o in options):
        raise Unreadable
    values = {o.get("value") for o in options}
    if values - {value}:
        raise Unreadable
    return value in values


def _block_ids(fields: list[EditField], on_form: set[str]) -> set[str]:
    ids: set[str] = set()
    for f in fields:
        if f.name not in on_form:
            continue
        if f.typed:
            ids.add(f.name[:255])
            if f.clearable_date:
                ids.add(f"{f.name}::{CLEAR}"[:255])
        else:
            ids |= {part_id(f.name, i)[:255] for i in range(len(parts_of(f.text)))}
    return ids


def read_submission(
    state: dict[str, dict[str, Any]], fields: list[EditField], schema: dict[str, Any]
) -> Submitted:
    """The form's values per field; which fields came back as shown (a field the modal could
    not hold has no input and is unchanged); and each field's problem in words."""
    values: dict[str, Any] = {}
    texts: dict[str, str] = {}
    unchanged: set[str] = set()
    errors: dict[str, str] = {}
    on_form = placed(fields)
    first = next((f.name[:255] for f in fields if f.name in on_form), "arguments")
    expected = _block_ids(fields, on_form)
    if set(state) - expected:
        errors[first] = FOREIGN_BLOCK
    elif expected - set(state):  # Slack sends every input's state (an empty one as null)
        errors[first] = MISSING_BLOCK
    for f in fields:
        if f.name not in on_form:
            unchanged.add(f.name)  # no input for it: kept as it is
            continue
        if not f.typed:
            count = len(parts_of(f.text))
            typed = "".join(
                str(state.get(part_id(f.name, i)[:255], {}).get("value") or "")
                for i in range(count)
            )
            if _same(typed, f.text):
                unchanged.add(f.name)
            if typed:
                texts[f.name] = typed
            continue
        try:
            value = _typed(f, state.get(f.name[:255], {}))
            if f.clearable_date and _ticked(state.get(f"{f.name}::{CLEAR}"[:255], {}), "clear"):
                value = None
        except Unreadable:
            errors[f.name[:255]] = in_words(f.kind, "unreadable")
            continue
        if f.kind.kind is Kind.BOOLEAN and f.value is None and value is False:
            value = None  # an unset yes/no left unticked stays unset
        if value == f.value and type(value) is type(f.value):
            unchanged.add(f.name)
        elif value is None or value == []:
            if not f.optional:
                errors[f.name[:255]] = in_words(f.kind, MISSING)
        else:
            values[f.name] = value
    values.update(from_strings(schema, texts))
    return Submitted(values, unchanged, errors)
