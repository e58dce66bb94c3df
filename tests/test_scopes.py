"""Scopes are right and proven (issue 26): every Slack method the bot calls is in the scope
table (`bot/slack/scopes.py`, from Slack's method pages), `manifest.yml` grants what each call
needs, the fake Slack answers `missing_scope` as Slack does when the token lacks it, and
`countersign doctor` says which scopes an installed token lacks and what that breaks."""

from __future__ import annotations

import ast
import inspect
import json
from pathlib import Path

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

import bot
from bot.doctor import check_scopes
from bot.slack.scopes import METHODS, Kind, gaps, method_name
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import BOT_TOKEN, FakeSlack, manifest_scopes
from tests.harness import RunningBot, clean_env, run_cli
from tests.test_approvals_flow import CREATE, call
from tests.test_audience import SECRET, private_exec, read_exec
from tests.test_manifest import EVENT_SCOPES

ROOT = Path(bot.__file__).parent
SDK_METHODS = frozenset(
    name for name, _ in inspect.getmembers(AsyncWebClient, inspect.iscoroutinefunction)
) - {"api_call"}
# slack_sdk helpers that call several methods, and what they call.
HELPERS = {"chat_stream": ("chat.startStream", "chat.appendStream", "chat.stopStream")}
# What Bolt calls on the bot's client by itself: auth.test to authorize each request.
BOLT_CALLS = frozenset({"auth.test"})


def slack_calls(source: str) -> set[str]:
    """Every Slack method `source` calls or keeps to call: `client.<method>`, `getattr(client,
    "<method>")`, `api_call("<method>")`; an `api_call` whose method is not written out is
    reported as `api_call(?)`, which no table holds (but `super().api_call(method)`, the
    budgeted client passing every call on, calls nothing of its own)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in SDK_METHODS | set(HELPERS):
            found |= set(HELPERS.get(node.attr, (method_name(node.attr),)))
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        first = node.args[0] if node.args else None
        forwarded = (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Call)
            and getattr(func.value.func, "id", "") == "super"
        )
        if name == "api_call" and not forwarded:  # `super().api_call`: the budgeted client
            value = first.value if isinstance(first, ast.Constant) else None
            found.add(value if isinstance(value, str) else "api_call(?)")
        if name == "getattr" and len(node.args) > 1:
            second = node.args[1]
            if isinstance(second, ast.Constant) and second.value in SDK_METHODS:
                found.add(method_name(str(second.value)))
    return found


def methods_the_bot_calls() -> dict[str, set[str]]:
    """method -> the files of bot/ that call it (the poster's calls included)."""
    found: dict[str, set[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        for method in slack_calls(path.read_text(encoding="utf-8")):
            found.setdefault(method, set()).add(str(path.relative_to(ROOT.parent)))
    for method in BOLT_CALLS:
        found.setdefault(method, set()).add("slack_bolt")
    return found


def test_the_scan_sees_every_way_of_calling_slack() -> None:
    source = """
client.conversations_open(users=user)
send = slack.reactions_add
getattr(client, "users_info")(user=user)
client.api_call("files.info", params={})
client.api_call(name)
super().api_call(api_method, **kwargs)
client.chat_stream(channel=c)
# client.conversations_kick(...) in a comment is no call
"""
    assert slack_calls(source) == {
        "conversations.open",
        "reactions.add",
        "users.info",
        "files.info",
        "api_call(?)",
        "chat.startStream",
        "chat.appendStream",
        "chat.stopStream",
    }


def test_every_method_the_bot_calls_is_in_the_scope_table() -> None:
    calls = methods_the_bot_calls()
    # The scan finds the calls we know of (a scan that finds nothing proves nothing).
    assert {"conversations.open", "chat.postMessage", "usergroups.users.list"} <= set(calls)
    unlisted = {m: sorted(files) for m, files in calls.items() if m not in METHODS}
    assert unlisted == {}, f"add these methods to bot/slack/scopes.py: {unlisted}"


def test_the_manifest_grants_a_scope_for_every_call_the_bot_makes() -> None:
    missing = [gap.sentence() for gap in gaps(manifest_scopes(), methods_the_bot_calls())]
    assert missing == [], f"manifest.yml lacks: {missing}"


def unneeded(scopes: frozenset[str]) -> set[str]:
    """Scopes no call of the bot, no event it subscribes to and no command needs."""
    needed = {s for entry in METHODS.values() for _, any_of in entry.needs() for s in any_of}
    events = {s for s in EVENT_SCOPES.values() if s}
    return set(scopes) - needed - events - {"commands"}


def test_the_manifest_asks_for_no_scope_nothing_needs() -> None:
    assert unneeded(manifest_scopes()) == set()
    # A scope added "to be safe" is caught (least privilege: a token that leaks reads less).
    assert unneeded(manifest_scopes() | {"files:write", "chat:write.public"}) == {
        "files:write",
        "chat:write.public",
    }


def test_each_kind_of_conversation_is_mapped_to_its_own_family_of_scopes() -> None:
    """Slack names a conversation's scopes after its kind: a scope under the wrong kind in the
    table (im:write for public channels, say) would make the tests and doctor wrong."""
    family = {Kind.PUBLIC: "channels:", Kind.PRIVATE: "groups:", Kind.DM: "im:"}
    family[Kind.GROUP_DM] = "mpim:"
    for method, entry in METHODS.items():
        for kind, scopes in entry.by_kind.items():
            assert scopes, (method, kind)
            assert all(s.startswith(family[kind]) for s in scopes), (method, kind, scopes)
        assert entry.used_on <= set(entry.by_kind), method


def test_a_manifest_without_im_write_is_caught_with_what_it_breaks() -> None:
    (gap,) = gaps(manifest_scopes() - {"im:write"})
    assert gap.any_of == {"im:write"}
    assert gap.where is Kind.DM
    assert gap.methods == ("conversations.open",)
    assert "private cards" in gap.sentence()


def test_a_conversation_method_needs_its_scope_on_each_kind_the_bot_uses() -> None:
    # Public channels only: private channels and DMs are still missing.
    only_public = manifest_scopes() - {"groups:history", "im:history"}
    found = {(g.where, frozenset(g.any_of)) for g in gaps(only_public)}
    assert found == {
        (Kind.PRIVATE, frozenset({"groups:history"})),
        (Kind.DM, frozenset({"im:history"})),
    }
    # Slack takes any one of a method's scopes: manage instead of write.topic is enough.
    other = manifest_scopes() - {"channels:write.topic"} | {"channels:manage"}
    assert gaps(other) == []


# -- the fake answers as Slack does -----------------------------------------------------------


def client(fake: FakeSlack) -> AsyncWebClient:
    return AsyncWebClient(token=BOT_TOKEN, base_url=fake.api_url)


async def test_the_fake_answers_missing_scope_like_slack(fake_slack: FakeSlack) -> None:
    fake_slack.scopes = manifest_scopes() - {"im:write"}
    with pytest.raises(SlackApiError) as refused:
        await client(fake_slack).conversations_open(users="UBOB")
    answer = refused.value.response
    assert answer["error"] == "missing_scope"
    assert answer["needed"] == "im:write"
    assert set(answer["provided"].split(",")) == fake_slack.scopes
    assert answer.headers["x-oauth-scopes"] == answer["provided"]
    assert answer.headers["x-accepted-oauth-scopes"] == "im:write"
    assert "DBOB" not in fake_slack.channel_info  # nothing was opened
    # Given the scope, the same call works.
    fake_slack.scopes = manifest_scopes()
    opened = await client(fake_slack).conversations_open(users="UBOB")
    assert opened["channel"]["id"] == "DBOB"


async def test_the_fake_checks_the_scope_of_the_conversation_kind(fake_slack: FakeSlack) -> None:
    fake_slack.scopes = frozenset({"channels:history", "chat:write"})
    fake_slack.add_user_message("CPUB", "hello")
    fake_slack.channel_info["C1"] = {"id": "C1", "is_private": True}
    slack = client(fake_slack)
    assert (await slack.conversations_history(channel="CPUB"))["ok"]
    for channel, scope in (("GEXEC", "groups:history"), ("C1", "groups:history")):
        with pytest.raises(SlackApiError) as refused:
            await slack.conversations_history(channel=channel)
        assert refused.value.response["needed"] == scope
    with pytest.raises(SlackApiError) as refused:
        await slack.conversations_replies(channel="DALICE", ts="1.0")
    assert refused.value.response["needed"] == "im:history"
    # A method not about a conversation: its own scope.
    with pytest.raises(SlackApiError) as refused:
        await slack.users_info(user="UBOB")
    assert (refused.value.response["error"], refused.value.response["needed"]) == (
        "missing_scope",
        "users:read",
    )
    # No scope needed, none checked; and every answer names the token's scopes.
    tested = await slack.auth_test()
    assert tested.headers["x-oauth-scopes"] == "channels:history,chat:write"


async def test_the_fake_enforces_every_method_of_the_table(fake_slack: FakeSlack) -> None:
    """With no scope at all, each method that takes one is refused and names what it takes."""
    fake_slack.scopes = frozenset()
    slack = client(fake_slack)
    for method, entry in METHODS.items():
        try:
            answer = (await slack.api_call(method, json={"channel": "CPUB"})).data
        except SlackApiError as exc:
            answer = exc.response.data
        assert isinstance(answer, dict)
        if entry.accepted(Kind.PUBLIC):
            assert answer.get("error") == "missing_scope", method
            assert set(answer["needed"].split(",")) == entry.accepted(Kind.PUBLIC), method
        else:
            assert answer.get("error") != "missing_scope", method


async def test_the_fake_grants_the_manifest_by_default(fake_slack: FakeSlack) -> None:
    assert fake_slack.scopes == manifest_scopes()
    assert "im:write" in fake_slack.scopes
    assert (await client(fake_slack).conversations_open(users="UCAROL"))["ok"]


async def test_a_bot_without_im_write_cannot_send_a_private_card_and_leaks_nothing(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """What a real workspace did before `im:write` was in the manifest: the card meant for the
    requester alone cannot be delivered; the fake says why, and the secret stays out of the
    public thread."""
    fake_slack.scopes = manifest_scopes() - {"im:write"}
    private_exec(fake_slack)
    fake_slack.members["GEXEC"] = ["UALICE", "UBOT"]
    fake_model.script(
        Script(tool_calls=[read_exec()]),
        Script(tool_calls=[call("create_task", CREATE | {"description": SECRET}, "w1")]),
        Script(text="Tracked."),
    )
    await bot.mention("C1", "read GEXEC and track what it says", fake_slack)
    await bot.idle()
    opens = fake_slack.calls_to("conversations.open")
    assert opens
    assert {c.error for c in opens} == {"missing_scope"}
    assert fake_slack.cards("DALICE") == []
    public = json.dumps([(m.text, m.blocks) for m in fake_slack.channels["C1"]])
    assert SECRET not in public


# -- doctor -----------------------------------------------------------------------------------


def test_doctor_names_each_missing_scope_and_what_it_breaks() -> None:
    header = ",".join(sorted(manifest_scopes() - {"im:write", "usergroups:read"}))
    check = check_scopes(header)
    assert not check.ok
    assert "im:write" in check.detail
    assert "open a DM with one person" in check.detail
    assert "usergroups:read" in check.detail
    assert "user group approve" in check.detail
    assert "reinstall" in check.detail
    assert check_scopes(",".join(manifest_scopes())).ok
    # Slack said nothing of the scopes: said so, not failed.
    silent = check_scopes(None)
    assert silent.ok
    assert "not checked" in silent.detail


def test_doctor_checks_the_installed_tokens_scopes(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, tmp_path: Path
) -> None:
    from tests.fakes import openai as fake_openai

    env = clean_env(
        SLACK_BOT_TOKEN=BOT_TOKEN,
        SLACK_SIGNING_SECRET="secret",
        SLACK_API_URL=fake_slack.api_url,
        OPENAI_API_KEY=fake_openai.API_KEY,
        OPENAI_BASE_URL=fake_model.base_url,
        LLM_MODEL=fake_openai.MODEL,
        DATABASE_URL=f"sqlite:///{tmp_path / 'bot.db'}",
    )
    ok = run_cli(["doctor"], env, tmp_path)
    assert "[ok] slack scopes: the token has every scope the bot needs" in ok.stdout, ok.stdout

    fake_slack.scopes = manifest_scopes() - {"im:write"}
    bad = run_cli(["doctor"], env, tmp_path)
    assert bad.returncode == 1
    (line,) = [s for s in bad.stdout.splitlines() if s.startswith("[FAIL] slack scopes")]
    assert "im:write" in line
    assert "private cards" in line
    assert "Traceback" not in bad.stdout + bad.stderr
