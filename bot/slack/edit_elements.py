"""The Edit modal's typed controls: a person picker for a person, a channel picker for a
channel, a date picker, a date-time picker, a menu of choices, a number box, a checkbox; each
element shows the card's current value, in the shape Slack documents for it.

A value the control cannot show (a person field holding a name, a choice the menu does not
have, more choices than a menu holds) is edited as text instead, so saving the form without
touching it never loses a value.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from bot.tools.field_kinds import FieldKind, Kind, label_of
from bot.tools.invisible import hidden_count

ACTION = "value"  # every input's action id
MENU_MAX = 100  # static_select: at most 100 options
OPTION_TEXT_MAX = 75
OPTION_VALUE_MAX = 150
# `\Z`, not `$`: `$` also matches before a final newline (a forged "UBOB\n").
SLACK_USER = re.compile(r"^[UW][A-Z0-9]{1,40}\Z")
SLACK_CHANNEL = re.compile(r"^[CG][A-Z0-9]{1,40}\Z")
TYPED = {
    Kind.USER,
    Kind.USERS,
    Kind.CHANNEL,
    Kind.CHANNELS,
    Kind.DATE,
    Kind.DATETIME,
    Kind.CHOICE,
    Kind.INTEGER,
    Kind.NUMBER,
    Kind.BOOLEAN,
}
CHANNELS_ONLY = {"include": ["public", "private"]}  # conversation pickers offer channels only
PLACEHOLDERS = {
    Kind.USER: "Choose a person",
    Kind.USERS: "Choose people",
    Kind.CHANNEL: "Choose a channel",
    Kind.CHANNELS: "Choose channels",
    Kind.DATE: "Pick a date",
    Kind.CHOICE: "Choose one",
}


def _plain(text: str, most: int) -> dict[str, Any]:
    return {"type": "plain_text", "text": text[:most]}


def as_date(value: Any) -> date | None:
    if not isinstance(value, str):
        return None
    try:
        return date.fromisoformat(value) if len(value) == 10 else None
    except ValueError:
        return None


def as_datetime(value: Any) -> datetime | None:
    """An ISO 8601 date-time; one without a zone is read as UTC."""
    if not isinstance(value, str) or len(value) < 16:
        return None
    try:
        found = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    return found if found.tzinfo else found.replace(tzinfo=UTC)


def _seconds(value: Any) -> int:
    when = as_datetime(value)
    try:
        return int(when.timestamp()) if when is not None else -1
    except (OverflowError, OSError, ValueError):
        return -1


def _ids(value: Any, pattern: re.Pattern[str]) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) and pattern.match(v) for v in value)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def menu_usable(kind: FieldKind) -> bool:
    """Whether the choices fit a static menu (Slack: 100 options, values 1-150 characters),
    each distinct and with no character that hides itself (a menu could not show it; as text
    the card's [U+…] codes are one click away)."""
    choices = kind.choices
    return (
        0 < len(choices) < MENU_MAX
        and len(set(choices)) == len(choices)
        and all(0 < len(c) <= OPTION_VALUE_MAX and not hidden_count(c) for c in choices)
    )


def shows(kind: FieldKind, value: Any) -> bool:
    """Whether the typed control for `kind` can show `value` (None: an empty control)."""
    if kind.kind not in TYPED or (kind.kind is Kind.CHOICE and not menu_usable(kind)):
        return False
    if value is None:
        return True
    checks: dict[Kind, Callable[[Any], bool]] = {
        Kind.USER: lambda v: isinstance(v, str) and bool(SLACK_USER.match(v)),
        Kind.CHANNEL: lambda v: isinstance(v, str) and bool(SLACK_CHANNEL.match(v)),
        Kind.USERS: lambda v: _ids(v, SLACK_USER),
        Kind.CHANNELS: lambda v: _ids(v, SLACK_CHANNEL),
        Kind.DATE: lambda v: as_date(v) is not None,
        Kind.DATETIME: lambda v: 0 <= _seconds(v) < 10**10,  # the picker's 10 digits
        Kind.CHOICE: lambda v: v in kind.choices,
        Kind.INTEGER: lambda v: isinstance(v, int) and not isinstance(v, bool),
        Kind.NUMBER: _is_number,
        Kind.BOOLEAN: lambda v: isinstance(v, bool),
    }
    return bool(checks[kind.kind](value))


def none_value(kind: FieldKind) -> str:
    """The value of an optional menu's "None" option: one that no choice has."""
    value = "-"
    while value in kind.choices:
        value += "-"
    return value


def choice_options(kind: FieldKind, clearable: bool) -> list[dict[str, Any]]:
    """The choices in words ("In progress"); a choice whose words another choice shares shows
    as written, so no two options read the same."""
    worded = [label_of(c) for c in kind.choices]
    options = [
        {
            "text": _plain(c if worded.count(w) > 1 else w, OPTION_TEXT_MAX),
            "value": c,
        }
        for c, w in zip(kind.choices, worded, strict=True)
    ]
    if clearable:
        options.insert(0, {"text": _plain("None", OPTION_TEXT_MAX), "value": none_value(kind)})
    return options


def _number_text(value: float) -> str:
    """A number as Slack's number input takes it: digits, no exponent."""
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return format(Decimal(repr(float(value))), "f")


def number_element(kind: FieldKind, value: Any) -> dict[str, Any]:
    element: dict[str, Any] = {
        "type": "number_input",
        "is_decimal_allowed": kind.kind is Kind.NUMBER,
    }
    if kind.minimum is not None:
        element["min_value"] = _number_text(kind.minimum)
    if kind.maximum is not None:
        element["max_value"] = _number_text(kind.maximum)
    if _is_number(value):
        element["initial_value"] = _number_text(value)
    return element


def typed_element(kind: FieldKind, value: Any, clearable: bool) -> dict[str, Any]:
    """The element for a typed field holding `value` (`shows(kind, value)` is true).

    A person or channel that may be emptied uses the multi-select with one item at most:
    Slack's single pickers cannot be emptied once a value is chosen; a menu gets "None"."""
    k = kind.kind
    element: dict[str, Any]
    if k is Kind.USER and not clearable:
        element = {"type": "users_select"} | ({"initial_user": value} if value else {})
    elif k in (Kind.USER, Kind.USERS):
        initial = [value] if isinstance(value, str) else list(value or [])
        element = {"type": "multi_users_select"} | ({"initial_users": initial} if initial else {})
        if k is Kind.USER:
            element["max_selected_items"] = 1
    elif k is Kind.CHANNEL and not clearable:
        element = {"type": "conversations_select", "filter": CHANNELS_ONLY}
        if value:
            element["initial_conversation"] = value
    elif k in (Kind.CHANNEL, Kind.CHANNELS):
        initial = [value] if isinstance(value, str) else list(value or [])
        element = {"type": "multi_conversations_select", "filter": CHANNELS_ONLY}
        if initial:
            element["initial_conversations"] = initial
        if k is Kind.CHANNEL:
            element["max_selected_items"] = 1
    elif k is Kind.DATE:
        element = {"type": "datepicker"} | ({"initial_date": value} if value else {})
    elif k is Kind.DATETIME:
        when = as_datetime(value)
        element = {"type": "datetimepicker"}
        if when is not None:
            element["initial_date_time"] = _seconds(value)
    elif k is Kind.CHOICE:
        options = choice_options(kind, clearable)
        element = {"type": "static_select", "options": options}
        chosen = value if value is not None else (none_value(kind) if clearable else None)
        picked = next((o for o in options if o["value"] == chosen), None)
        if picked is not None:
            element["initial_option"] = picked
    elif k in (Kind.INTEGER, Kind.NUMBER):
        element = number_element(kind, value)
    else:  # Kind.BOOLEAN
        option = {"text": _plain("Yes", OPTION_TEXT_MAX), "value": "true"}
        element = {"type": "checkboxes", "options": [option]}
        if value is True:
            element["initial_options"] = [option]
    if k in PLACEHOLDERS and element["type"] != "checkboxes":
        element["placeholder"] = _plain(PLACEHOLDERS[k], 150)
    return {**element, "action_id": ACTION}


def clear_element() -> dict[str, Any]:
    """A date picker cannot be emptied in Slack: a date that may be emptied has a box for that."""
    option = {"text": _plain("Leave it empty", OPTION_TEXT_MAX), "value": "clear"}
    return {"type": "checkboxes", "options": [option], "action_id": ACTION}
