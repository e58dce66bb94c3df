"""Interactive payloads parsed into typed values before anything acts on them.

Slack signs what it sends, but a payload's contents are still whatever a button value or a
modal's metadata held, and a workspace member can craft a button of their own. Anything this app
did not make is a `BadPayload`: it changes nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from bot.slack.cards import BadValue, parse_card_ref, parse_ref


class BadPayload(ValueError):
    pass


@dataclass(frozen=True)
class Click:
    user: str
    proposal_id: int
    revision: int | None
    channel: str | None
    thread_ts: str | None
    trigger_id: str | None
    digest: str | None = None  # the arguments' digest the clicked card showed
    part: str | None = None  # what a Show all button opens
    in_modal: bool = False  # clicked inside a modal (a Show all in "more fields")


@dataclass(frozen=True)
class Submission:
    user: str
    proposal_id: int
    revision: int | None
    values: dict[str, str]  # block id -> the text typed into its input
    # block id -> its element's state as Slack sent it (`selected_user`, `selected_date`...)
    state: dict[str, dict[str, Any]] = field(default_factory=dict)


def _str(value: Any, limit: int = 255) -> str | None:
    return value if isinstance(value, str) and 0 < len(value) <= limit else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _user(body: dict[str, Any]) -> str:
    user = _str(_dict(body.get("user")).get("id"), 32)
    if user is None:
        raise BadPayload("no user")
    return user


def parse_click(body: dict[str, Any]) -> Click:
    actions = body.get("actions")
    if not isinstance(actions, list) or not actions or not isinstance(actions[0], dict):
        raise BadPayload("no action")
    try:
        ref = parse_ref(actions[0].get("value"))
    except BadValue as exc:
        raise BadPayload(str(exc)) from None
    channel = _str(_dict(body.get("channel")).get("id"), 32) or _str(
        _dict(body.get("container")).get("channel_id"), 32
    )
    return Click(
        user=_user(body),
        proposal_id=ref.proposal_id,
        revision=ref.revision,
        channel=channel,
        thread_ts=_str(_dict(body.get("message")).get("thread_ts"), 32),
        trigger_id=_str(body.get("trigger_id")),
        digest=ref.digest,
        part=ref.part,
        in_modal=_dict(body.get("container")).get("type") == "view",
    )


def parse_submission(body: dict[str, Any]) -> Submission:
    view = _dict(body.get("view"))
    try:
        proposal_id, revision = parse_card_ref(view.get("private_metadata"))
    except BadValue as exc:
        raise BadPayload(str(exc)) from None
    values: dict[str, str] = {}
    state: dict[str, dict[str, Any]] = {}
    for block_id, inputs in list(_dict(_dict(view.get("state")).get("values")).items())[:200]:
        element = _dict(_dict(inputs).get("value"))
        if not isinstance(block_id, str):
            continue
        state[block_id[:255]] = element
        typed = element.get("value")
        if isinstance(typed, str):
            values[block_id] = typed[:10_000]
    return Submission(_user(body), proposal_id, revision, values, state)


# -- the /history buttons: values this app made are small JSON objects or numbers ----------
def button_value(body: dict[str, Any]) -> str:
    actions = body.get("actions")
    value = actions[0].get("value") if isinstance(actions, list) and actions else None
    if not isinstance(value, str) or len(value) > 200:
        raise BadPayload("no value")
    return value


def button_json(body: dict[str, Any]) -> dict[str, Any]:
    try:
        value = json.loads(button_value(body))
    except json.JSONDecodeError:
        raise BadPayload("not JSON") from None
    if not isinstance(value, dict):
        raise BadPayload("not an object")
    return value


def whole_number(value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**31:
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) < 10:
        return int(value)
    raise BadPayload("not a number")


def clicker(body: dict[str, Any]) -> str:
    user = (body.get("user") or {}).get("id")
    if not isinstance(user, str) or not user:
        raise BadPayload("no user")
    return user
