"""The DM welcomes: the first time a person opens the bot's DM (or starts an assistant thread)
the bot says what it can do and what needs whose approval, in words made from the tools
offered and the policy in force, once per person (not again after a restart), then offers the
suggested prompts."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from bot.suggested_prompts import DEFAULT_PROMPTS
from tests.fakes.openai import FakeOpenAI
from tests.fakes.slack import FakeSlack, StoredMessage, wait_until
from tests.harness import RunningBot, make_settings, start_bot, stop_bot

PROMPTS = [p.model_dump() for p in DEFAULT_PROMPTS]


async def open_dm(bot: RunningBot, user: str, tab: str = "messages") -> None:
    event = {"type": "app_home_opened", "user": user, "channel": f"D{user}", "tab": tab}
    assert await bot.send_event(event) == 200


async def start_thread(bot: RunningBot, user: str, thread_ts: str, **extra: Any) -> None:
    thread = {"user_id": user, "channel_id": f"D{user}", "thread_ts": thread_ts}
    thread.update(extra)
    event = {"type": "assistant_thread_started", "assistant_thread": thread, "event_ts": "1.0"}
    assert await bot.send_event(event) == 200


def welcomes(fake_slack: FakeSlack, user: str) -> list[StoredMessage]:
    return fake_slack.bot_messages(f"D{user}")


async def test_the_first_open_welcomes_with_what_the_bot_can_do_then_prompts(
    bot: RunningBot, fake_slack: FakeSlack
) -> None:
    await open_dm(bot, "UALICE")
    await wait_until(lambda: bool(fake_slack.suggested_prompts))
    (welcome,) = welcomes(fake_slack, "UALICE")
    text = welcome.text
    assert text.startswith("Hi <@UALICE>!")  # a mention: Slack shows the person's name
    assert "*I look up on my own:* List tasks, Get task" in text
    assert "*Asks you to approve a card first:* Create task, Update task" in text
    assert "Post message" in text
    assert "nothing changes until a person allowed to approve clicks *Approve*" in text
    assert "in a thread where I've answered, just reply" in text
    assert "create_task" not in text
    assert "_" not in text.replace("`/", "")
    assert welcome.thread_ts is None  # the DM itself
    (offered,) = fake_slack.suggested_prompts
    assert offered["channel_id"] == "DUALICE"
    assert offered["prompts"] == PROMPTS
    assert "thread_ts" not in offered  # the Messages tab: no thread to name


async def test_the_welcome_is_posted_once_per_person_even_across_a_restart(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    bot = await start_bot(make_settings(fake_slack, fake_model, sqlite_url))
    try:
        await open_dm(bot, "UALICE")
        await start_thread(bot, "UALICE", "1700000000.000100")  # at the same moment
        await open_dm(bot, "UALICE")
        await open_dm(bot, "UBOB", tab="home")  # the Home tab is not the DM
        await bot.idle()
        await wait_until(lambda: len(fake_slack.suggested_prompts) == 2)
    finally:
        await stop_bot(bot)
    assert len(welcomes(fake_slack, "UALICE")) == 1
    assert welcomes(fake_slack, "UBOB") == []

    again = await start_bot(make_settings(fake_slack, fake_model, sqlite_url))
    try:
        await open_dm(again, "UALICE")
        await start_thread(again, "UALICE", "1700000000.000200")
        await open_dm(again, "UBOB")
        await again.idle()
        await wait_until(lambda: len(welcomes(fake_slack, "UBOB")) == 1)
        await asyncio.sleep(0.2)
    finally:
        await stop_bot(again)
    assert len(welcomes(fake_slack, "UALICE")) == 1  # the restart did not repeat it


async def test_a_new_assistant_thread_gets_the_welcome_and_its_prompts_in_it(
    bot: RunningBot, fake_slack: FakeSlack
) -> None:
    await start_thread(bot, "UCAROL", "1700000000.000300", context={"channel_id": "C1"})
    await wait_until(lambda: bool(fake_slack.suggested_prompts))
    (welcome,) = welcomes(fake_slack, "UCAROL")
    assert welcome.thread_ts == "1700000000.000300"
    (offered,) = fake_slack.suggested_prompts
    assert offered["channel_id"] == "DUCAROL"
    assert offered["thread_ts"] == "1700000000.000300"
    assert offered["prompts"] == PROMPTS
    await start_thread(bot, "UCAROL", "1700000000.000400")  # every new thread: prompts
    await wait_until(lambda: len(fake_slack.suggested_prompts) == 2)
    assert len(welcomes(fake_slack, "UCAROL")) == 1  # the welcome: once


async def test_the_welcome_says_what_the_policy_in_force_decides(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "version: 1\n"
        "default: ask\n"
        "rules:\n"
        "  - {name: four-eyes-posts, tools: [post_message], outcome: ask, four_eyes: true}\n"
        "  - {name: no-topics, tools: [set_channel_topic], outcome: deny}\n"
        "  - {name: own-comments, tools: [comment_on_task], outcome: allow}\n"
        "  - name: low-tasks\n"
        "    tools: [create_task]\n"
        "    when: 'args.priority == \"low\"'\n"
        "    outcome: allow\n"
    )
    bot = await start_bot(make_settings(fake_slack, fake_model, sqlite_url, policy_file=policy))
    try:
        await open_dm(bot, "UALICE")
        await wait_until(lambda: bool(welcomes(fake_slack, "UALICE")))
    finally:
        await stop_bot(bot)
    lines = welcomes(fake_slack, "UALICE")[0].text.splitlines()
    assert "*Asks someone other than you to approve a card first:* Post message." in lines
    assert "*Turned off by your team's policy:* Set channel topic." in lines
    assert "*Runs without a card (your team's policy allows it):* Comment on task." in lines
    ask_you = next(line for line in lines if line.startswith("*Asks you"))
    assert "Create task¹" in ask_you
    assert "Set channel topic" not in ask_you
    assert any(line.startswith("¹ Sometimes otherwise") for line in lines)


async def test_mention_mode_does_not_promise_thread_follow_ups(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    bot = await start_bot(
        make_settings(fake_slack, fake_model, sqlite_url, thread_followups="mention")
    )
    try:
        await open_dm(bot, "UALICE")
        await wait_until(lambda: bool(welcomes(fake_slack, "UALICE")))
    finally:
        await stop_bot(bot)
    text = welcomes(fake_slack, "UALICE")[0].text
    assert "mention me to start" in text
    assert "just reply" not in text


async def test_a_welcome_slack_refused_is_tried_again_at_the_next_open(
    bot: RunningBot, fake_slack: FakeSlack
) -> None:
    fake_slack.fail_methods["chat.postMessage"] = "internal_error"
    await open_dm(bot, "UALICE")
    await wait_until(lambda: bool(fake_slack.suggested_prompts))  # prompts still offered
    await bot.idle()
    assert welcomes(fake_slack, "UALICE") == []
    del fake_slack.fail_methods["chat.postMessage"]
    await open_dm(bot, "UALICE")
    await wait_until(lambda: bool(welcomes(fake_slack, "UALICE")))
    assert len(welcomes(fake_slack, "UALICE")) == 1


async def test_malformed_thread_starts_post_nothing(bot: RunningBot, fake_slack: FakeSlack) -> None:
    bad: list[dict[str, Any]] = [
        {"type": "assistant_thread_started"},
        {"type": "assistant_thread_started", "assistant_thread": "DUALICE"},
        {  # a channel, not the person's DM
            "type": "assistant_thread_started",
            "assistant_thread": {"user_id": "UALICE", "channel_id": "C1", "thread_ts": "1.2"},
        },
        {  # no thread
            "type": "assistant_thread_started",
            "assistant_thread": {"user_id": "UALICE", "channel_id": "DUALICE"},
        },
        {  # junk where the person belongs
            "type": "assistant_thread_started",
            "assistant_thread": {"user_id": {"id": 1}, "channel_id": "DX", "thread_ts": "1.2"},
        },
    ]
    for event in bad:
        assert await bot.send_event(event) == 200
    await bot.idle()
    await asyncio.sleep(0.2)
    assert fake_slack.bot_messages("C1") == []
    assert welcomes(fake_slack, "UALICE") == []
    assert fake_slack.suggested_prompts == []


async def test_an_open_with_junk_for_the_person_or_a_channel_posts_nothing(
    bot: RunningBot, fake_slack: FakeSlack
) -> None:
    for user, channel in (("U1><!channel", "DU1"), ("x" * 40, "DLONG"), ("UALICE", "C1")):
        event = {"type": "app_home_opened", "user": user, "channel": channel, "tab": "messages"}
        assert await bot.send_event(event) == 200
    await bot.idle()
    await asyncio.sleep(0.2)
    assert all(fake_slack.bot_messages(c) == [] for c in ("DU1", "DLONG", "C1"))


async def test_two_replicas_opened_at_once_welcome_once(
    migrated_postgres_url: str, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    settings = make_settings(fake_slack, fake_model, migrated_postgres_url)
    first = await start_bot(settings)
    second = await start_bot(settings)
    try:
        await asyncio.gather(
            open_dm(first, "UDANA"),
            open_dm(second, "UDANA"),
            start_thread(second, "UDANA", "1700000000.000500"),
        )
        await wait_until(lambda: len(fake_slack.suggested_prompts) == 3)
        await first.idle()
        await second.idle()
    finally:
        await stop_bot(first)
        await stop_bot(second)
    assert len(welcomes(fake_slack, "UDANA")) == 1
