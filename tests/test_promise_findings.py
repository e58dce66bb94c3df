"""The smaller breaks of issue 7, each attacked: a resume acting for the wrong person, a click
that waits on cosmetic card edits, events acknowledged during shutdown and then dropped, a
thread import that trusts other apps' words as the assistant's."""

from __future__ import annotations

import asyncio
import json
import time

from sqlalchemy import select

from bot.db.models import Message, Proposal, Role, Task
from bot.slack import cards
from tests.data_blocks import unwrapped
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack, StoredMessage
from tests.harness import RunningBot, make_settings, start_bot
from tests.test_approvals_flow import CREATE, call


async def test_a_resumed_turn_acts_for_the_person_who_asked(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(
        Script(tool_calls=[call("create_task", CREATE)]),
        Script(tool_calls=[call("create_task", {**CREATE, "title": "Follow-up"}, "call_2")]),
    )
    root = await bot.mention("C1", "track it", fake_slack, user="UALICE")
    await bot.idle()
    # Bob speaks last (to Alice: context for the bot, not a question to it)
    await bot.say(fake_slack, "C1", "<@UALICE> nice", user="UBOB", thread_ts=root)
    await bot.idle()
    await bot.click(fake_slack.cards("C1")[0], cards.APPROVE, "UALICE", "C1")
    await bot.idle()
    async with bot.countersign.db.transaction() as session:
        requesters = (await session.scalars(select(Proposal.requester).order_by(Proposal.id))).all()
    assert requesters == ["UALICE", "UALICE"]  # the follow-up is Alice's to approve, not Bob's


async def test_execution_does_not_wait_for_the_edit_budget(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Script(tool_calls=[call("create_task", CREATE)]), Script(text="Done."))
    await bot.mention("C1", "track it", fake_slack)
    await bot.idle()
    window = bot.countersign.budget.window
    while (await window.take(0))[0]:  # every chat.update of the minute is spent
        pass
    clicked = time.monotonic()
    await bot.click(fake_slack.cards("C1")[0], cards.APPROVE, "UALICE", "C1")
    while True:
        async with bot.countersign.db.transaction() as session:
            if await session.scalar(select(Task.id)):
                break
        # The budget refills in a minute: a write that waited for it would take that long.
        assert time.monotonic() - clicked < 30, "the write waited on the card's edit"
        await asyncio.sleep(0.02)
    # Then Slack's minute passes (a wider window stands in for it): the card's edit, which
    # waited for the budget, lands, and the bot stops without 10 s of waiting on it.
    bot.countersign.budget.resize(10_000)
    await bot.idle()
    (card,) = fake_slack.cards("C1")
    assert "Created TASK-1" in json.dumps(card.blocks)  # the card shows the outcome


async def test_events_during_shutdown_are_refused_for_redelivery_not_dropped(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    bot = await start_bot(make_settings(fake_slack, fake_model, sqlite_url))
    fake_model.script(Script(text="slow " * 40, tokens_per_second=20))
    await bot.mention("C1", "keep talking", fake_slack)
    await asyncio.sleep(0.3)
    bot.stop.set()  # SIGTERM: the drain begins while the first reply is still streaming
    await asyncio.sleep(0.2)
    status = await bot.send_event(
        {"type": "app_mention", "user": "UALICE", "text": "late", "ts": "9.9", "channel": "C1"}
    )
    assert status == 503  # Slack will deliver it again, to a replica that is up
    await asyncio.wait_for(bot.task, 60)
    await bot.session.close()
    assert fake_model.requests[-1].body["messages"][-1]["content"] != "late"


async def test_other_apps_in_a_joined_thread_are_not_the_assistant(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    root = fake_slack.add_user_message("C1", "deploy failed", user="UALICE")
    said = fake_slack._next_ts()
    fake_slack.channels["C1"].append(
        StoredMessage(said, "I am the deploy bot: rollback done", None, "BDEPLOY", root)
    )
    fake_model.script(Script(text="Seen."))
    await bot.mention("C1", "what happened?", fake_slack, thread_ts=root)
    await bot.idle()
    sent = fake_model.requests[-1].body["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "user", "user"]
    assert unwrapped(sent[2]["content"]).startswith("[message from another app")
    assert sent[2]["content"].startswith('<data source="message from an app">')  # untrusted
    async with bot.countersign.db.transaction() as session:
        roles = (await session.scalars(select(Message.role).order_by(Message.id))).all()
    assert Role.ASSISTANT in roles  # only its own answer
    assert roles.count(Role.ASSISTANT) == 1
