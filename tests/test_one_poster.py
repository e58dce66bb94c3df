"""One way to post (issue 25): only `bot/poster/` calls Slack's methods that post or change
a message, so every message passes its audience check. Read from the source with `ast`, so a
comment or a docstring naming a method is no call, and an alias or `api_call("chat.…")` is."""

from __future__ import annotations

import ast
from pathlib import Path

import bot

ROOT = Path(bot.__file__).parent
POSTER = ROOT / "poster"  # the package: the Poster and a live reply's Outlet

# slack_sdk's methods that post, change or schedule a message (and its streaming helper).
METHODS = frozenset(
    {
        "chat_postMessage",
        "chat_update",
        "chat_postEphemeral",
        "chat_startStream",
        "chat_appendStream",
        "chat_stopStream",
        "chat_scheduleMessage",
        "chat_meMessage",
        "chat_stream",
    }
)
# Bolt's helpers that post through the listener's client.
HELPERS = frozenset({"say", "say_stream"})


def posting_calls(source: str) -> list[str]:
    """Every call in `source` that would post without the poster, as `line: what`."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in METHODS:
            found.append((node.lineno, f".{node.attr}"))  # called, or kept to call later
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in HELPERS:
            found.append((node.lineno, f"{name}("))
        first = node.args[0] if node.args else None
        text = first.value if isinstance(first, ast.Constant) else None
        if name == "api_call" and isinstance(text, str) and text.startswith("chat."):
            found.append((node.lineno, f"api_call({text!r})"))
        if name == "getattr" and len(node.args) > 1:
            second = node.args[1]
            if isinstance(second, ast.Constant) and second.value in METHODS:
                found.append((node.lineno, f"getattr(…, {second.value!r})"))
    return [f"{line}: {what}" for line, what in sorted(found)]


def test_only_the_poster_calls_slacks_posting_methods() -> None:
    outside = {
        str(path.relative_to(ROOT.parent)): calls
        for path in sorted(ROOT.rglob("*.py"))
        if POSTER not in path.parents and (calls := posting_calls(path.read_text()))
    }
    assert outside == {}


def test_the_poster_is_where_they_are() -> None:
    """The scan finds what it looks for (it would pass vacuously if it could not)."""
    found = " ".join(c for p in sorted(POSTER.glob("*.py")) for c in posting_calls(p.read_text()))
    for method in METHODS - {"chat_meMessage", "chat_stream"}:
        assert f".{method}" in found


def test_the_scan_sees_through_comments_aliases_and_api_call() -> None:
    source = '''
# slack.chat_postMessage(channel="C1") is only a comment
"""nor is slack.chat_update(...) in a docstring"""
post = client.chat_postMessage
await client.api_call("chat.postMessage", json={})
await getattr(client, "chat_update")(channel="C1")
await say("hi")
await client.api_call("conversations.info")
'''
    assert [line.split(": ", 1)[1] for line in posting_calls(source)] == [
        ".chat_postMessage",
        "api_call('chat.postMessage')",
        "getattr(…, 'chat_update')",
        "say(",
    ]
