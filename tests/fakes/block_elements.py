"""The input elements a modal may hold, within the limits Slack documents for each (Slack
answers `invalid_arguments` to a view that breaks one): placeholders 150 characters, a
static menu 100 options whose texts are 75 characters and values 150, an initial option that
is one of the options, a date as YYYY-MM-DD, a date-time as unix seconds, a number input's
values as text, checkboxes 10 options."""

from __future__ import annotations

import re
from typing import Any


class ElementError(ValueError):
    pass


INPUT_ELEMENTS = {
    "plain_text_input",
    "number_input",
    "users_select",
    "multi_users_select",
    "conversations_select",
    "multi_conversations_select",
    "channels_select",
    "datepicker",
    "datetimepicker",
    "static_select",
    "checkboxes",
    "radio_buttons",
}
CONVERSATION_TYPES = {"im", "mpim", "private", "public"}
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")
_USER = re.compile(r"^[UW][A-Z0-9]+$")
_CONVERSATION = re.compile(r"^[CGD][A-Z0-9]+$")


def _text(obj: Any, most: int, what: str) -> None:
    if obj is None:
        return
    if not isinstance(obj, dict) or obj.get("type") != "plain_text":
        raise ElementError(f"{what} must be plain_text")
    if not 1 <= len(str(obj.get("text", ""))) <= most:
        raise ElementError(f"{what} must be 1 to {most} characters")


def _options(element: dict[str, Any], most: int) -> list[dict[str, Any]]:
    options = element.get("options")
    if not isinstance(options, list) or not 1 <= len(options) <= most:
        raise ElementError(f"{element['type']} needs 1 to {most} options")
    for option in options:
        _text(option.get("text"), 75, "option text")
        if not 1 <= len(str(option.get("value", ""))) <= 150:
            raise ElementError("option value must be 1 to 150 characters")
    return options


def _ids(values: Any, pattern: re.Pattern[str], what: str) -> None:
    if not isinstance(values, list) or not all(
        isinstance(v, str) and pattern.match(v) for v in values
    ):
        raise ElementError(f"{what} must be a list of ids")


def check_input_element(element: Any) -> None:
    if not isinstance(element, dict) or element.get("type") not in INPUT_ELEMENTS:
        raise ElementError("not an input element")
    kind = element["type"]
    _text(element.get("placeholder"), 150, "placeholder")
    if len(str(element.get("action_id", ""))) > 255:
        raise ElementError("action_id over 255")
    if "max_selected_items" in element and not (
        isinstance(element["max_selected_items"], int) and element["max_selected_items"] >= 1
    ):
        raise ElementError("max_selected_items must be 1 or more")
    if kind in ("static_select", "radio_buttons", "checkboxes"):
        options = _options(element, 100 if kind == "static_select" else 10)
        chosen = element.get("initial_options", [])
        if "initial_option" in element:
            chosen = [element["initial_option"]]
        if any(c not in options for c in chosen):
            raise ElementError("an initial option must be one of the options")
    elif kind == "users_select" and "initial_user" in element:
        _ids([element["initial_user"]], _USER, "initial_user")
    elif kind == "multi_users_select" and "initial_users" in element:
        _ids(element["initial_users"], _USER, "initial_users")
    elif kind == "conversations_select" and "initial_conversation" in element:
        _ids([element["initial_conversation"]], _CONVERSATION, "initial_conversation")
    elif kind == "multi_conversations_select" and "initial_conversations" in element:
        _ids(element["initial_conversations"], _CONVERSATION, "initial_conversations")
    elif kind == "datepicker" and "initial_date" in element:
        if not _DATE.match(str(element["initial_date"])):
            raise ElementError("initial_date must be YYYY-MM-DD")
    elif kind == "datetimepicker" and "initial_date_time" in element:
        when = element["initial_date_time"]
        if not isinstance(when, int) or isinstance(when, bool) or when < 0:
            raise ElementError("initial_date_time must be unix seconds")
    elif kind == "number_input":
        if not isinstance(element.get("is_decimal_allowed"), bool):
            raise ElementError("number_input needs is_decimal_allowed")
        for key in ("initial_value", "min_value", "max_value"):
            if key in element and not (
                isinstance(element[key], str) and _NUMBER.match(element[key])
            ):
                raise ElementError(f"number_input {key} must be a number as text")
    include = (element.get("filter") or {}).get("include", [])
    if set(include) - CONVERSATION_TYPES:
        raise ElementError("filter.include holds im, mpim, private or public")
