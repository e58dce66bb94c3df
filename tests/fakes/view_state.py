"""A modal's `view.state.values` as Slack sends it with `view_submission`: every input block
of the view, each in its element's documented shape (`selected_user`, `selected_users`,
`selected_conversation`, `selected_date` "YYYY-MM-DD", `selected_date_time` unix seconds,
`selected_option` {text, value}, a number's `value` text, checkboxes' `selected_options`).

A block the person did not touch sends its initial value, as in Slack. A test says what the
person chose as text (an id, a date, an option's value, "true" for a ticked box, "" for
nothing); a block id the view does not have is sent as typed text (a crafted payload).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

Chosen = str | int | list[str] | None


def _ids(chosen: Chosen) -> list[str]:
    if isinstance(chosen, list):
        return chosen
    return [p.strip() for p in str(chosen or "").split(",") if p.strip()]


def _seconds(chosen: Chosen) -> int | None:
    if chosen in (None, ""):
        return None
    if isinstance(chosen, int) or str(chosen).lstrip("-").isdigit():
        return int(str(chosen))
    return int(datetime.fromisoformat(str(chosen).replace("Z", "+00:00")).timestamp())


def _option(element: dict[str, Any], chosen: Chosen) -> dict[str, Any] | None:
    if chosen in (None, ""):
        return None
    found = [o for o in element.get("options") or [] if o["value"] == chosen]
    crafted = {"text": {"type": "plain_text", "text": str(chosen)}, "value": chosen}
    return found[0] if found else crafted


def initial_state(element: dict[str, Any]) -> dict[str, Any]:
    kind = element.get("type", "plain_text_input")
    table: dict[str, Callable[[], dict[str, Any]]] = {
        "plain_text_input": lambda: {"value": element.get("initial_value")},
        "number_input": lambda: {"value": element.get("initial_value")},
        "users_select": lambda: {"selected_user": element.get("initial_user")},
        "multi_users_select": lambda: {"selected_users": element.get("initial_users", [])},
        "conversations_select": lambda: {
            "selected_conversation": element.get("initial_conversation")
        },
        "multi_conversations_select": lambda: {
            "selected_conversations": element.get("initial_conversations", [])
        },
        "datepicker": lambda: {"selected_date": element.get("initial_date")},
        "datetimepicker": lambda: {"selected_date_time": element.get("initial_date_time")},
        "static_select": lambda: {"selected_option": element.get("initial_option")},
        "checkboxes": lambda: {"selected_options": element.get("initial_options", [])},
    }
    return {"type": kind, **table[kind]()}


def chosen_state(element: dict[str, Any], chosen: Chosen) -> dict[str, Any]:
    kind = element.get("type", "plain_text_input")
    empty = chosen in (None, "")
    table: dict[str, Callable[[], dict[str, Any]]] = {
        "plain_text_input": lambda: {"value": chosen},
        "number_input": lambda: {"value": chosen},
        "users_select": lambda: {"selected_user": None if empty else chosen},
        "multi_users_select": lambda: {"selected_users": _ids(chosen)},
        "conversations_select": lambda: {"selected_conversation": None if empty else chosen},
        "multi_conversations_select": lambda: {"selected_conversations": _ids(chosen)},
        "datepicker": lambda: {"selected_date": None if empty else chosen},
        "datetimepicker": lambda: {"selected_date_time": _seconds(chosen)},
        "static_select": lambda: {"selected_option": _option(element, chosen)},
        "checkboxes": lambda: {
            "selected_options": [
                o for o in element.get("options") or [] if o["value"] in _ids(chosen)
            ]
            or ([] if empty or chosen == "false" else [{"value": chosen}])
        },
    }
    return {"type": kind, **table[kind]()}


def view_state(view: dict[str, Any], chosen: dict[str, Chosen]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for block in view.get("blocks") or []:
        if block.get("type") != "input":
            continue
        element = block.get("element") or {}
        block_id = block["block_id"]
        action = element.get("action_id", "value")
        if block_id in chosen:
            values[block_id] = {action: chosen_state(element, chosen[block_id])}
        else:
            values[block_id] = {action: initial_state(element)}
    for block_id, typed in chosen.items():
        if block_id not in values:
            values[block_id] = {"value": {"type": "plain_text_input", "value": typed}}
    return values
