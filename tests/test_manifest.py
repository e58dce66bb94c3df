"""manifest.yml is a Slack app manifest the bot can actually run with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from bot.slack.scopes import METHODS, gaps

MANIFEST = Path(__file__).parent.parent / "manifest.yml"

# Which bot scope each subscribed event needs (Slack's Events API reference).
EVENT_SCOPES = {
    "app_mention": "app_mentions:read",
    "message.channels": "channels:history",
    "message.groups": "groups:history",
    "message.im": "im:history",
    "app_home_opened": None,
    "agent_session_stopped": "assistant:write",
    "assistant_thread_started": "assistant:write",
}


def load() -> dict[str, Any]:
    data = yaml.safe_load(MANIFEST.read_text())
    assert isinstance(data, dict)
    return data


def test_manifest_declares_socket_mode_events_home_and_commands() -> None:
    manifest = load()
    settings, features = manifest["settings"], manifest["features"]
    assert settings["socket_mode_enabled"] is True
    assert settings["interactivity"]["is_enabled"] is True
    assert features["app_home"]["home_tab_enabled"] is True
    assert features["app_home"]["messages_tab_enabled"] is True
    assert features["assistant_view"]["assistant_description"]
    assert len(manifest["display_information"]["name"]) <= 35
    assert len(features["bot_user"]["display_name"]) <= 80
    commands = {c["command"]: c for c in features["slash_commands"]}
    assert set(commands) == {"/history", "/approvals", "/usage"}
    assert all(len(c["description"]) <= 2000 for c in commands.values())
    events = settings["event_subscriptions"]["bot_events"]
    assert set(events) == set(EVENT_SCOPES)


def test_manifest_asks_only_for_the_scopes_it_needs() -> None:
    """Events' scopes, `commands`, and one scope Slack accepts for each call the bot makes
    (bot/slack/scopes.py, proven against the bot's calls in tests/test_scopes.py)."""
    manifest = load()
    scopes = set(manifest["oauth_config"]["scopes"]["bot"])
    events = {s for s in EVENT_SCOPES.values() if s}
    assert events | {"commands"} <= scopes
    assert gaps(scopes) == []
    calls = {s for entry in METHODS.values() for _, any_of in entry.needs() for s in any_of}
    assert scopes - events - {"commands"} <= calls
    # conversations.open with one person (a DM: cards, copies and details sent privately);
    # conversations.info of a DM (whose it is, before a card is posted there)
    assert {"im:write", "im:read"} <= scopes
