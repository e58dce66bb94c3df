"""The whole approval flow against the fakes: a write call becomes a card, a click decides,
the tool runs once, the card follows, and the model resumes in the same thread."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import select

from bot.db.models import AuditEntry, Proposal, Task
from bot.slack import cards
from tests.card_reading import card_fields
from tests.data_blocks import unwrapped
from tests.fakes.openai import FakeOpenAI, Script, ScriptedToolCall
from tests.fakes.slack import FakeSlack, StoredMessage
from tests.harness import RunningBot, make_settings, start_bot, stop_bot

CREATE = {
    "title": "Fix login bug",
    "description": "SSO loops",
    "assignee": "UDANA",
    "due_date": "2026-11-27",
    "priority": "high",
}


def call(name: str, arguments: dict[str, Any] | str, call_id: str = "call_1") -> ScriptedToolCall:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ScriptedToolCall(call_id, name, raw)


def card_text(card: StoredMessage) -> str:
    return json.dumps(card.blocks, ensure_ascii=False)


def card_mrkdwn(card: StoredMessage) -> str:
    """The card's text that Slack parses for mentions and links: its fallback text and every
    mrkdwn text object (plain_text objects are shown as they are, never parsed)."""
    found: list[str] = [card.text]

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if node.get("type") == "mrkdwn":
                found.append(str(node.get("text", "")))
            for child in node.values():
                walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    walk(card.blocks)
    return "\n".join(found)


async def proposals(bot: RunningBot) -> list[Proposal]:
    async with bot.countersign.db.transaction() as session:
        return list((await session.scalars(select(Proposal).order_by(Proposal.id))).all())


async def tasks_in_db(bot: RunningBot) -> list[Task]:
    async with bot.countersign.db.transaction() as session:
        return list((await session.scalars(select(Task).order_by(Task.id))).all())


async def audit(bot: RunningBot) -> list[AuditEntry]:
    async with bot.countersign.db.transaction() as session:
        return list((await session.scalars(select(AuditEntry).order_by(AuditEntry.id))).all())


def tool_results(model: FakeOpenAI) -> list[dict[str, Any]]:
    return [
        json.loads(unwrapped(m["content"]))
        for m in model.requests[-1].body["messages"]
        if m["role"] == "tool"
    ]


@pytest.fixture
async def linked_bot(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> AsyncIterator[RunningBot]:
    running = await start_bot(
        make_settings(fake_slack, fake_model, sqlite_url, public_base_url="https://cs.example.com")
    )
    yield running
    await stop_bot(running)


async def test_create_task_approved_runs_once_and_the_model_resumes(
    linked_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = linked_bot
    fake_model.script(
        Script(text="I'll create it.", tool_calls=[call("create_task", CREATE)]),
        Script(text="Done: TASK-1 is on the board."),
    )
    root = await bot.mention("C1", "please track the login bug for Dana", fake_slack)
    await bot.idle()

    reply = fake_slack.bot_messages("C1")[0]
    assert reply.text.startswith("I'll create it.")
    assert "Waiting for approval of 1 action" in reply.text
    (card,) = fake_slack.cards("C1")
    assert card.thread_ts == root
    shown = card_text(card)
    assert "Create task 'Fix login bug' assigned to @udana, due Friday 2026-11-27" in shown
    assert card_fields(card)["Title"] == "Fix login bug"
    assert card_fields(card)["Priority"] == "high"
    assert await tasks_in_db(bot) == []  # nothing written before the click
    assert len(fake_model.requests) == 1

    assert await bot.click(card, cards.APPROVE, "UALICE", "C1") == 200
    await bot.idle()

    (task,) = await tasks_in_db(bot)
    assert (task.title, task.assignee, task.due_date, task.priority) == (
        "Fix login bug",
        "UDANA",
        "2026-11-27",
        "high",
    )
    card = fake_slack.cards("C1")[0]
    assert "*Done*: Created TASK-1" in card.text or "Created TASK-1" in card_text(card)
    assert "<https://cs.example.com/tasks/1?team=T0TEST&amp;expires=" in card_text(card)
    assert cards.APPROVE not in card_text(card)  # the buttons gave way to the state
    history = fake_slack.history[card.ts]
    assert any("executing" in t for t in history)  # it showed "executing" on the way
    # The model resumed in the same thread with the result.
    assert len(fake_model.requests) == 2
    (result,) = tool_results(fake_model)
    assert result["status"] == "succeeded"
    assert result["result"]["task"]["ref"] == "TASK-1"
    resumed = [
        m for m in fake_slack.bot_messages("C1") if m.text == "Done: TASK-1 is on the board."
    ]
    assert len(resumed) == 1
    assert resumed[0].thread_ts == root
    events = [(a.event, a.to_state) for a in await audit(bot)]
    assert events == [
        ("propose", "proposed"),
        ("approve", "approved"),
        ("start", "executing"),
        ("succeed", "succeeded"),
    ]


async def test_decline_with_reason_reaches_the_model(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(
        Script(tool_calls=[call("create_task", CREATE)]),
        Script(text="Understood, I won't."),
    )
    await bot.mention("C1", "track it", fake_slack)
    await bot.idle()
    (card,) = fake_slack.cards("C1")
    await bot.click(card, cards.DECLINE, "UALICE", "C1")
    await bot.idle()
    modal = fake_slack.views[-1]["view"]
    assert modal["callback_id"] == cards.DECLINE_MODAL
    status, answer = await bot.submit_view(modal, "UALICE", {"reason": "duplicate of TASK-7"})
    assert status == 200
    assert "errors" not in answer
    await bot.idle()
    assert await tasks_in_db(bot) == []
    (result,) = tool_results(fake_model)
    assert result["status"] == "declined"
    assert result["reason"] == "duplicate of TASK-7"
    assert "Do not repeat the same call" in result["instruction"]
    assert "Declined" in card_text(fake_slack.cards("C1")[0])
    assert "duplicate of TASK-7" in card_text(fake_slack.cards("C1")[0])
    assert fake_slack.bot_messages("C1")[-1].text == "Understood, I won't."


async def test_invalid_arguments_never_execute_and_the_model_retries(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(
        Script(
            tool_calls=[
                call("create_task", "{not json", "c1"),
                call("create_task", {"title": ""}, "c2"),
                call("drop_database", {}, "c3"),
            ]
        ),
        Script(text="Sorry, let me fix that."),
    )
    await bot.mention("C1", "track it", fake_slack)
    await bot.idle()
    assert fake_slack.cards("C1") == []
    assert await proposals(bot) == []
    results = tool_results(fake_model)
    assert [r["status"] for r in results] == ["invalid_arguments", "invalid_arguments", "error"]
    assert "not valid JSON" in results[0]["error"]
    assert "title" in results[1]["error"]
    assert "no tool 'drop_database'" in results[2]["error"]
    assert fake_slack.bot_messages("C1")[0].text.endswith("Sorry, let me fix that.")


async def test_read_tools_run_at_once(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(
        Script(
            tool_calls=[
                call("list_tasks", {"status": "open", "assignee": None, "text": None, "limit": 5})
            ]
        ),
        Script(text="There are no open tasks."),
    )
    await bot.mention("C1", "what's open?", fake_slack)
    await bot.idle()
    assert fake_slack.cards("C1") == []
    assert tool_results(fake_model) == [{"tasks": []}]
    (reply,) = fake_slack.bot_messages("C1")
    assert reply.text == "There are no open tasks."


async def test_tool_rounds_are_capped(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    looping = Script(tool_calls=[call("list_tasks", {})])
    fake_model.default = looping
    bot = await start_bot(make_settings(fake_slack, fake_model, sqlite_url, max_tool_rounds=3))
    try:
        await bot.mention("C1", "loop", fake_slack)
        await bot.idle()
    finally:
        await stop_bot(bot)
    assert len(fake_model.requests) == 4
    assert "stopped after 3 rounds" in fake_slack.bot_messages("C1")[0].text
