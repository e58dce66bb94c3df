"""The DM as an agent: suggested prompts when a person opens it (configured or the defaults),
at most once an hour each, and a title for each new DM thread from its first question."""

from __future__ import annotations

import json
from pathlib import Path

from bot.slack.agent_threads import thread_title
from bot.suggested_prompts import DEFAULT_PROMPTS
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack, wait_until
from tests.harness import RunningBot, clean_env, make_settings, run_cli, start_bot, stop_bot


async def open_dm(bot: RunningBot, user: str, tab: str = "messages") -> None:
    event = {"type": "app_home_opened", "user": user, "channel": f"D{user}", "tab": tab}
    assert await bot.send_event(event) == 200


async def test_opening_the_dm_offers_the_default_prompts_once_an_hour(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    bot = await start_bot(make_settings(fake_slack, fake_model, sqlite_url, streaming="auto"))
    try:
        await open_dm(bot, "UALICE")
        await wait_until(lambda: bool(fake_slack.suggested_prompts))
        await open_dm(bot, "UALICE")  # again within the hour: not asked again
        await open_dm(bot, "UBOB", tab="home")  # the Home tab is not the DM
        await bot.idle()
    finally:
        await stop_bot(bot)
    (offered,) = fake_slack.suggested_prompts
    assert offered["channel_id"] == "DUALICE"
    assert offered["prompts"] == [p.model_dump() for p in DEFAULT_PROMPTS]
    assert 1 <= len(offered["prompts"]) <= 4


async def test_configured_prompts_replace_the_defaults_and_none_turns_them_off(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, tmp_path: Path
) -> None:
    mine = [{"title": "Deploy status", "message": "Is today's deploy green?"}]
    bot = await start_bot(
        make_settings(fake_slack, fake_model, sqlite_url, suggested_prompts=json.dumps(mine))
    )
    try:
        await open_dm(bot, "UALICE")
        await wait_until(lambda: bool(fake_slack.suggested_prompts))
    finally:
        await stop_bot(bot)
    assert fake_slack.suggested_prompts[0]["prompts"] == mine

    fake_slack.suggested_prompts.clear()
    quiet = await start_bot(
        make_settings(fake_slack, fake_model, f"sqlite:///{tmp_path}/q.db", suggested_prompts="[]")
    )
    try:
        await open_dm(quiet, "UALICE")
        await quiet.idle()
    finally:
        await stop_bot(quiet)
    assert fake_slack.suggested_prompts == []


def test_bad_prompts_are_refused_with_a_clear_message(tmp_path: Path) -> None:
    base = {"SLACK_BOT_TOKEN": "xoxb-1", "OPENAI_API_KEY": "sk-x"}
    five = json.dumps([{"title": f"t{i}", "message": "m"} for i in range(5)])
    for value in (five, "[{", '[{"title": "no message"}]'):
        result = run_cli(["run"], clean_env(**base, SUGGESTED_PROMPTS=value), tmp_path)
        assert result.returncode == 2
        assert "SUGGESTED_PROMPTS is invalid" in result.stderr
        assert "Traceback" not in result.stderr


async def test_a_new_dm_thread_is_titled_after_its_first_question(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    bot = await start_bot(make_settings(fake_slack, fake_model, sqlite_url, streaming="auto"))
    try:
        fake_model.script(Script(text="Here is the plan."), Script(text="Done."))
        root = fake_slack.add_user_message("D1", "", user="UALICE")
        question = (
            "Can you plan the <@UBOB> offsite for the whole platform team next spring?"
            "\nDetails follow."
        )
        await bot.say(fake_slack, "D1", question, thread_ts=root)
        await bot.idle()
        await bot.say(fake_slack, "D1", "and a budget?", thread_ts=root)
        await bot.idle()
        await wait_until(lambda: bool(fake_slack.titles))
    finally:
        await stop_bot(bot)
    (titled,) = fake_slack.titles
    assert titled["thread_ts"] == root
    assert titled["title"] == thread_title(question)
    assert titled["title"] == "Can you plan the offsite for the whole platform team next…"


def test_titles_are_short_and_plain() -> None:
    assert thread_title("  <@U1>  hi   there ") == "hi there"
    assert thread_title("\n\nsecond line only") == "second line only"
    assert len(thread_title("x" * 500)) == 60
