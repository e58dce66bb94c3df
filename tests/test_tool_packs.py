"""Tool packs: the built-in ones, a team's own pack named in TOOL_PACKS, and bad pack names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.config import SettingsError, load_settings
from bot.slack import cards
from bot.tools.catalog import ToolRegistry
from examples import oncall_pack
from tests.data_blocks import unwrapped
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack
from tests.harness import make_settings, start_bot, stop_bot
from tests.test_approvals_flow import call, card_text


def test_builtin_packs_offer_strict_schemas() -> None:
    registry = ToolRegistry.from_packs(["bot.tools.packs.tasks", "bot.tools.packs.slack"])
    names = {t.name: t.requires_approval for t in registry}
    assert names == {
        "list_tasks": False,
        "get_task": False,
        "create_task": True,
        "update_task": True,
        "close_task": True,
        "comment_on_task": True,
        "get_channel_info": False,
        "get_recent_messages": False,
        "lookup_user": False,
        "post_message": True,
        "schedule_message": True,
        "set_channel_topic": True,
    }
    for schema in registry.schemas():
        assert schema["function"]["strict"] is True
        assert schema["function"]["parameters"]["additionalProperties"] is False


def test_a_pack_that_does_not_exist_is_a_clear_settings_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-1")
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("TOOL_PACKS", "bot.tools.packs.tasks,mycompany.nope")
    with pytest.raises(SettingsError) as caught:
        load_settings()
    assert "TOOL_PACKS is invalid (cannot import tool pack 'mycompany.nope'" in (
        caught.value.render()
    )


async def test_a_teams_own_pack_runs_through_approval(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    packs = ["bot.tools.packs.tasks", "examples.oncall_pack"]
    bot = await start_bot(make_settings(fake_slack, fake_model, sqlite_url, tool_packs=packs))
    fake_model.script(
        Script(
            tool_calls=[
                call("who_is_on_call", {"team": "payments"}, "r1"),
                call("set_on_call", {"team": "payments", "user": "U0CARL"}, "w1"),
            ]
        ),
        Script(text="Carl is on call now."),
    )
    try:
        await bot.mention("C1", "put Carl on call for payments", fake_slack)
        await bot.idle()
        (card,) = fake_slack.cards("C1")
        assert "Put @u0carl on call for payments" in card_text(card)
        assert "~@u0alice~ → @u0carl" in card_text(card)
        assert oncall_pack.ROTA["payments"] == "U0ALICE"
        await bot.click(card, cards.APPROVE, "UALICE", "C1")
        await bot.idle()
    finally:
        await stop_bot(bot)
    assert oncall_pack.ROTA["payments"] == "U0CARL"
    results = [
        json.loads(unwrapped(m["content"]))
        for m in fake_model.requests[-1].body["messages"]
        if m["role"] == "tool"
    ]
    assert results[0] == {"team": "payments", "user": "U0ALICE"}
    assert results[1]["status"] == "succeeded"
    oncall_pack.ROTA["payments"] = "U0ALICE"
