"""Feedback on answers: a finished native answer ends with feedback buttons; a click is stored
with the message and the person (a later click replaces it), acknowledged privately, shown in
/history and exported with the audit; a crafted click on someone else's message stores
nothing."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from bot.db.models import AnswerFeedback
from bot.slack.feedback import FEEDBACK
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import TEAM_ID, FakeSlack, wait_until
from tests.harness import RunningBot, clean_env, make_settings, run_cli, start_bot, stop_bot
from tests.test_approvals_flow import CREATE, call
from tests.test_records import answer, text_of


async def give(bot: RunningBot, channel: str, ts: str, user: str, value: str) -> int:
    payload: dict[str, Any] = {
        "type": "block_actions",
        "user": {"id": user, "team_id": TEAM_ID},
        "team": {"id": TEAM_ID},
        "trigger_id": f"trigger-{time.monotonic_ns()}",
        "container": {"type": "message", "message_ts": ts, "channel_id": channel},
        "channel": {"id": channel},
        "message": {"ts": ts, "text": ""},
        "actions": [
            {"type": "feedback_buttons", "action_id": FEEDBACK, "value": value, "action_ts": "1"}
        ],
    }
    status, _ = await bot._interact(payload)
    return status


async def stored(bot: RunningBot) -> list[tuple[str, str, str]]:
    async with bot.countersign.db.transaction() as session:
        rows = (await session.scalars(select(AnswerFeedback).order_by(AnswerFeedback.id))).all()
    return [(r.message_ts, r.user_id, r.value) for r in rows]


async def test_an_answer_ends_with_feedback_buttons_and_clicks_are_stored_and_shown(
    native_bot: RunningBot,
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    sqlite_url: str,
    tmp_path: Path,
) -> None:
    fake_model.script(Script(text="The answer is 42."))
    root = await native_bot.mention("C1", "what is the answer?", fake_slack)
    await native_bot.idle()
    (reply,) = fake_slack.streamed_messages("C1")
    buttons = fake_slack.feedback_buttons(reply.ts)
    assert buttons is not None
    assert buttons["type"] == "feedback_buttons"
    assert {buttons["positive_button"]["value"], buttons["negative_button"]["value"]} == {
        "good",
        "bad",
    }

    assert await give(native_bot, "C1", reply.ts, "UBOB", "good") == 200
    assert await give(native_bot, "C1", reply.ts, "UALICE", "good") == 200
    await native_bot.idle()
    assert await give(native_bot, "C1", reply.ts, "UBOB", "bad") == 200  # changed their mind
    await native_bot.idle()
    await wait_until(lambda: len(fake_slack.ephemerals_for("UBOB")) == 2)
    assert sorted(await stored(native_bot)) == [
        (reply.ts, "UALICE", "good"),
        (reply.ts, "UBOB", "bad"),
    ]
    assert "not helpful" in fake_slack.ephemerals_for("UBOB")[-1]

    link = f"<https://test.slack.com/archives/C1/p{root.replace('.', '')}>"
    _, _, key = await native_bot.command(fake_slack, "/history", link, "UALICE")
    shown = text_of((await answer(native_bot, fake_slack, key))["blocks"])
    assert ":thumbsup: 1 · :thumbsdown: 1" in shown

    env = clean_env(SLACK_BOT_TOKEN="xoxb-1", OPENAI_API_KEY="k", DATABASE_URL=sqlite_url)
    result = run_cli(
        ["audit", "export", "--format", "jsonl", "--records", "feedback"], env, tmp_path
    )
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert sorted((r["user"], r["value"], r["message_ts"]) for r in rows) == [
        ("UALICE", "good", reply.ts),
        ("UBOB", "bad", reply.ts),
    ]
    assert "exported 2 feedback record(s)" in result.stderr


async def test_a_paused_reply_has_no_feedback_buttons(
    native_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Script(tool_calls=[call("create_task", CREATE)]))
    await native_bot.mention("C1", "make a task", fake_slack)
    await native_bot.idle()
    (reply,) = fake_slack.streamed_messages("C1")
    assert fake_slack.feedback_buttons(reply.ts) is None


async def test_feedback_on_a_message_that_is_not_an_answer_stores_nothing(
    native_bot: RunningBot, fake_slack: FakeSlack
) -> None:
    someone = fake_slack.add_user_message("C1", "my own message", user="UBOB")
    assert await give(native_bot, "C1", someone, "UMALLORY", "good") == 200
    assert await give(native_bot, "C1", "1.2", "UMALLORY", "meh") == 200  # not a value
    await native_bot.idle()
    assert await stored(native_bot) == []
    await wait_until(lambda: bool(fake_slack.ephemerals_for("UMALLORY")))
    assert fake_slack.ephemerals_for("UMALLORY") == ["That button was not made by Countersign."]


@pytest.mark.parametrize("streaming", ["auto", "edit"])
async def test_an_answer_sent_as_edits_carries_the_buttons_too(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, streaming: str
) -> None:
    """`auto` falling back to edits (no stream start allowed) and the classic edit mode: the
    buttons ride the final edit of the answer's first message, its text unchanged."""
    fake_slack.fail_methods["chat.startStream"] = "not_allowed_token_type"
    long_text = "\n".join(f"line {i} " + "x" * 60 for i in range(70))  # two messages
    fake_model.script(Script(text="Short answer."), Script(text=long_text, tokens_per_second=0))
    bot = await start_bot(make_settings(fake_slack, fake_model, sqlite_url, streaming=streaming))
    try:
        await bot.mention("C1", "short please", fake_slack)
        await bot.idle()
        await bot.mention("C2", "long please", fake_slack)
        await bot.idle()
        (short,) = fake_slack.bot_messages("C1")
        assert short.text == "Short answer."
        assert fake_slack.feedback_buttons(short.ts) is not None
        assert text_of(short.blocks or []).count("Short answer.") == 1
        first, *rest = fake_slack.bot_messages("C2")
        assert rest, "the long answer continued in a second message"
        assert fake_slack.feedback_buttons(first.ts) is not None
        assert all(fake_slack.feedback_buttons(m.ts) is None for m in rest)
        assert "\n".join(m.text for m in [first, *rest]).count("line 69 ") == 1
        assert await give(bot, "C2", first.ts, "UBOB", "good") == 200
        await bot.idle()
        await wait_until(lambda: bool(fake_slack.ephemerals_for("UBOB")))
        assert await stored(bot) == [(first.ts, "UBOB", "good")]
    finally:
        await stop_bot(bot)


async def test_nobody_gives_feedback_on_answers_they_cannot_see(
    native_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_slack.channel_info["GSECRET"] = {"id": "GSECRET", "name": "secret", "is_private": True}
    fake_slack.members["GSECRET"] = ["UALICE", "UBOT"]
    fake_model.script(Script(text="Secret answer."), Script(text="Private answer."))
    await native_bot.mention("GSECRET", "a secret question", fake_slack)
    await native_bot.idle()
    await native_bot.say(fake_slack, "DALICE", "a private question")
    await native_bot.idle()
    (secret,) = fake_slack.bot_messages("GSECRET")
    (private,) = fake_slack.bot_messages("DALICE")
    assert await give(native_bot, "GSECRET", secret.ts, "UMALLORY", "bad") == 200
    assert await give(native_bot, "DALICE", private.ts, "UMALLORY", "bad") == 200
    await native_bot.idle()
    await wait_until(lambda: len(fake_slack.ephemerals_for("UMALLORY")) == 2)
    assert await stored(native_bot) == []
    assert await give(native_bot, "DALICE", private.ts, "UALICE", "good") == 200
    await native_bot.idle()
    await wait_until(lambda: bool(fake_slack.ephemerals_for("UALICE")))
    assert await stored(native_bot) == [(private.ts, "UALICE", "good")]
