"""Conversation titles: from the first request's words, or a title model's few words in the
background; shown in the App Home, /history and /approvals; a slow, failing or hostile title
model never hurts the reply nor pings anyone."""

from __future__ import annotations

import json
import time
from typing import Any

from sqlalchemy import select

from bot.conversation.titles import plain_title
from bot.db.models import Conversation
from bot.slack.record_views import HISTORY_OPEN
from tests.fakes.openai import Completion, FakeOpenAI, Script
from tests.fakes.slack import FakeSlack, wait_until
from tests.harness import RunningBot, running
from tests.test_approvals_flow import CREATE, call

ASKING_FOR_A_TITLE = "Write a title"


async def titles(bot: RunningBot) -> list[str | None]:
    async with bot.countersign.db.transaction() as session:
        return list((await session.scalars(select(Conversation.title))).all())


async def answered(bot: RunningBot, slack: FakeSlack, key: str) -> list[dict[str, Any]]:
    await wait_until(lambda: bool(slack.answers(key)), timeout=10)
    blocks: list[dict[str, Any]] = slack.answers(key)[-1]["blocks"]
    return blocks


async def open_home(bot: RunningBot, slack: FakeSlack, user: str) -> str:
    event = {"type": "app_home_opened", "user": user, "channel": "D1", "tab": "home"}
    published = len(slack.published)
    assert await bot.send_event(event) == 200
    await wait_until(lambda: len(slack.published) > published, timeout=10)
    await bot.idle()
    return json.dumps(slack.home_of(user), ensure_ascii=False)


async def test_first_words_name_a_conversation_everywhere_it_is_listed(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """No title model (TITLE_MODEL=off): the first request's first words, mentions removed."""
    fake_model.script(Script(tool_calls=[call("create_task", CREATE)]))
    await bot.mention("C1", "please track the <@UBOB> login bug for the release", fake_slack)
    await bot.idle()
    assert await titles(bot) == ["please track the login bug for the release"]
    assert fake_model.completions == []  # no model was asked

    home = await open_home(bot, fake_slack, "UALICE")
    assert "please track the login bug for the release" in home

    _, _, key = await bot.command(fake_slack, "/history", "", "UALICE")
    listed = json.dumps(await answered(bot, fake_slack, key))
    assert "|please track the login bug for the release>*" in listed

    _, _, key = await bot.command(fake_slack, "/approvals", "", "UALICE")
    approvals = json.dumps(await answered(bot, fake_slack, key))
    assert "|please track the login bug for the release>" in approvals


async def test_a_model_titles_the_conversation_and_its_dm_thread(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    async with running(fake_slack, fake_model, sqlite_url, title_model="") as bot:
        fake_model.complete_for(ASKING_FOR_A_TITLE, Completion('"Offsite planning."'))
        fake_model.script(Script(text="Here is a plan."))
        root = fake_slack.add_user_message("D1", "", user="UALICE")
        await bot.say(fake_slack, "D1", "Can you plan the offsite for next spring?", thread_ts=root)
        await bot.idle()
        assert await titles(bot) == ["Offsite planning"]
        (asked,) = fake_model.completions
        assert asked["model"] == "fake-model"  # TITLE_MODEL empty: the chat model
        assert asked["max_tokens"] <= 30  # a cheap call
        assert "plan the offsite" in asked["messages"][-1]["content"]
        (titled,) = fake_slack.titles  # the DM thread is titled once, with the final title
        assert titled == {"channel_id": "D1", "thread_ts": root, "title": "Offsite planning"}
        _, _, key = await bot.command(fake_slack, "/history", "", "UALICE")
        rows = [
            b
            for b in await answered(bot, fake_slack, key)
            if b.get("accessory", {}).get("action_id") == HISTORY_OPEN
        ]
        assert "Offsite planning" in json.dumps(rows)


async def test_a_slow_or_failing_title_model_never_holds_up_the_reply(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    async with running(
        fake_slack, fake_model, sqlite_url, title_model="", title_timeout_seconds=8
    ) as bot:
        # The title model would answer after a minute and is given up at 8 s; a reply that
        # waited for it would show only after that (the bound is the time-out, not the machine).
        fake_model.complete_for("slow one", Completion("Never used", delay=60.0))
        fake_model.complete_for("broken one", Completion(fail_status=500))
        fake_model.script(Script(text="First answer."), Script(text="Second answer."))
        started = time.monotonic()
        await bot.mention("C1", "the slow one", fake_slack)
        await wait_until(
            lambda: any(m.text == "First answer." for m in fake_slack.bot_messages("C1")),
            timeout=8,
        )
        assert time.monotonic() - started < 8  # the reply did not wait for the title
        assert await titles(bot) == ["the slow one"]  # the first words meanwhile
        await bot.mention("C2", "the broken one", fake_slack)
        await bot.idle()
        assert any(m.text == "Second answer." for m in fake_slack.bot_messages("C2"))
        assert sorted(t or "" for t in await titles(bot)) == ["the broken one", "the slow one"]


async def test_a_hostile_title_cannot_ping_or_mark_up_anything(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    async with running(fake_slack, fake_model, sqlite_url, title_model="cheap-model") as bot:
        hostile = (
            "<!channel> @here <@UBOSS> Payroll <https://evil.example|click> *now*\u202e"
            "\u200b\nsecond line"
        )
        fake_model.complete_for(ASKING_FOR_A_TITLE, Completion(hostile))
        fake_model.script(Script(text="ok"))
        await bot.mention("C1", "hello", fake_slack)
        await bot.idle()
        (title,) = await titles(bot)
        assert fake_model.completions[0]["model"] == "cheap-model"  # TITLE_MODEL
        assert title is not None
        assert title == "here Payroll *now"
        for mark in ("<", ">", "@", "\u202e", "\u200b", "\n", "second line"):
            assert mark not in title
        home = await open_home(bot, fake_slack, "UALICE")
        assert "<!channel>" not in home
        assert "evil.example" not in home


def test_plain_titles_keep_channel_names_and_drop_markup() -> None:
    assert plain_title("<@UBOT> status of <#C123|general> today?") == "status of #general today?"
    assert plain_title("# Release plan.") == "Release plan"
    assert plain_title('Title: "Badges for guests"') == "Badges for guests"
    assert plain_title("#general status") == "#general status"
    assert plain_title("<!subteam^S1|@oncall> <!here>") == ""
    assert len(plain_title("word " * 100)) <= 60
