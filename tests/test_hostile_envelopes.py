"""Promise 6 at the front door, case by case: every Socket Mode envelope is acknowledged within
Slack's 3 seconds whatever its payload (an event that is not an object, a view nobody opened, an
action id the bot never made, missing fields, event types it does not handle, a payload that is
not an object at all), junk never starts a reply, and HTTP answers a body it cannot read with a
4xx, not a 500.

Slack redelivers what is not acknowledged, so an envelope the bot drops on the floor comes back
again and again; one that starts a reply posts where nobody asked."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack, event_body, wait_until
from tests.harness import RunningBot

POSTING = {"chat.postMessage", "chat.update", "chat.startStream", "chat.postEphemeral"}
TS = "1700000000.000100"


def _event(**fields: Any) -> dict[str, Any]:
    return event_body(fields, f"Ev{time.monotonic_ns()}")


def _mention(**overrides: Any) -> dict[str, Any]:
    event = {"type": "app_mention", "user": "UALICE", "channel": "C1", "ts": TS, "text": "hi"}
    return _event(**{**event, **overrides})


# (name, envelope type, payload): none of these may start anything.
ENVELOPES: list[tuple[str, str, Any]] = [
    ("event is a string", "events_api", {**_mention(), "event": "junk"}),
    ("event is a list", "events_api", {**_mention(), "event": [1, 2]}),
    ("event is null", "events_api", {**_mention(), "event": None}),
    ("event missing", "events_api", {k: v for k, v in _mention().items() if k != "event"}),
    ("payload is a list", "events_api", [1, 2, 3]),
    ("payload is a string", "events_api", "payload"),
    ("unknown event type", "events_api", _event(type="made_up_event", user="UALICE")),
    ("reaction", "events_api", _event(type="reaction_added", user="UALICE", reaction="x")),
    ("event without a type", "events_api", _event(user="UALICE", channel="C1", ts=TS)),
    ("user is an object", "events_api", _mention(user={"id": "UALICE"})),
    ("user is empty", "events_api", _mention(user="")),
    ("channel is a list", "events_api", _mention(channel=["C1"])),
    ("channel missing", "events_api", _mention(channel=None)),
    ("ts is not a timestamp", "events_api", _mention(ts="yesterday")),
    ("ts is an object", "events_api", _mention(ts={"t": 1})),
    ("thread_ts is an object", "events_api", _mention(thread_ts={"a": 1})),
    ("text is a list", "events_api", _mention(text=["hi"])),
    ("team is a list", "events_api", {**_mention(), "team_id": ["T1"]}),
    (
        "DM with a channel that is a number",
        "events_api",
        _event(type="message", channel_type="im", user="UALICE", channel=5, ts=TS, text="hi"),
    ),
    (
        "unknown action id",
        "interactive",
        {
            "type": "block_actions",
            "user": {"id": "UALICE"},
            "team": {"id": "T0TEST"},
            "actions": [{"action_id": "no_such_action", "block_id": "b", "value": "1"}],
        },
    ),
    (
        "actions is not a list",
        "interactive",
        {"type": "block_actions", "user": {"id": "UALICE"}, "actions": "approve"},
    ),
    (
        "view nobody opened",
        "interactive",
        {
            "type": "view_submission",
            "user": {"id": "UALICE"},
            "team": {"id": "T0TEST"},
            "view": {"id": "V1", "callback_id": "no_such_view", "state": {"values": {}}},
        },
    ),
    (
        "view is a string",
        "interactive",
        {"type": "view_submission", "user": {"id": "UALICE"}, "view": "v"},
    ),
    (
        "view closed",
        "interactive",
        {"type": "view_closed", "user": {"id": "UALICE"}, "view": {"callback_id": "x"}},
    ),
    (
        "shortcut nobody declared",
        "interactive",
        {"type": "shortcut", "callback_id": "nothing", "user": {"id": "UALICE"}},
    ),
    ("interaction without a type", "interactive", {"user": {"id": "UALICE"}}),
    (
        "unknown slash command",
        "slash_commands",
        {"command": "/nope", "text": "", "user_id": "UALICE", "team_id": "T0TEST"},
    ),
    ("slash command without fields", "slash_commands", {"command": 7}),
    ("unknown envelope type", "made_up", {"anything": True}),
]


async def _wait_acked(fake_slack: FakeSlack, envelope_id: str, timeout: float) -> bool:
    try:
        await wait_until(
            lambda: any(a.get("envelope_id") == envelope_id for a in fake_slack.socket_acks),
            timeout=timeout,
        )
    except (TimeoutError, AssertionError):
        return False
    return True


def _posts(fake_slack: FakeSlack) -> list[tuple[str, dict[str, Any]]]:
    return [(c.method, c.args) for c in fake_slack.calls if c.method in POSTING]


async def test_every_hostile_envelope_is_acknowledged_and_starts_nothing(
    socket_bot: asyncio.Task[None], fake_slack: FakeSlack
) -> None:
    late: list[str] = []
    for number, (name, kind, payload) in enumerate(ENVELOPES):
        envelope_id = f"hostile-{number}"
        started = time.monotonic()
        await asyncio.to_thread(fake_slack.push_socket_event, payload, envelope_id, kind)
        if not await _wait_acked(fake_slack, envelope_id, 3) or time.monotonic() - started >= 3:
            late.append(name)
    assert late == []
    await asyncio.sleep(1.5)  # a reply a junk event had started would have posted by now
    assert _posts(fake_slack) == []
    assert not socket_bot.done()


async def test_a_well_formed_mention_after_the_junk_still_gets_its_reply(
    socket_bot: asyncio.Task[None], fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """The control: the same path that ignored the junk answers a real mention."""
    for number, (_name, kind, payload) in enumerate(ENVELOPES[:8]):
        await asyncio.to_thread(fake_slack.push_socket_event, payload, f"junk-{number}", kind)
    fake_model.default = Script(text="hello there")
    await asyncio.to_thread(fake_slack.push_socket_event, _mention(), "good-1", "events_api")
    assert await _wait_acked(fake_slack, "good-1", 3)
    await wait_until(
        lambda: any("hello there" in m.text for m in fake_slack.bot_messages("C1")), timeout=10
    )


@pytest.mark.parametrize(
    "body",
    [
        b"\xff\xfe\x00binary\x80\x81",
        b"payload=%FF%FE%80",
        b"\xc3\x28" * 50,
    ],
)
async def test_a_signed_body_that_is_not_text_gets_a_4xx(bot: RunningBot, body: bytes) -> None:
    headers = bot.signed_headers(body)
    status, _ = await bot.post_raw(body, headers)
    assert 400 <= status < 500
    unsigned_status, _ = await bot.post_raw(body, {"Content-Type": "application/json"})
    assert 400 <= unsigned_status < 500
    async with bot.session.get(bot.url + "/healthz") as response:
        assert response.status == 200
