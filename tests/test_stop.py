"""Slack's Stop button through the front door: the model request is cancelled at once, the reply
ends with who stopped it, undecided proposals are withdrawn (cards say so, audited), the turn
never resumes, a write already executing finishes, and only the person the turn works for (or
an approver) can stop it, whichever replica Slack tells."""

from __future__ import annotations

import asyncio
import json
import time

from sqlalchemy import select

from bot.conversation.stop_signals import StopSignals
from bot.db.models import AuditEntry
from bot.slack import cards
from bot.states import State
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack, wait_until
from tests.harness import RunningBot, make_settings, start_bot, stop_bot
from tests.test_approvals_flow import CREATE, call, card_text, proposals
from tests.test_native_stream import WORDS, session_statuses
from tests.test_replicas import REDIS_URL

LONG = " ".join(f"token{i}" for i in range(400)) + "."  # 10 s at 40 tokens/s


async def shown_words(slack: FakeSlack, channel: str, count: int) -> str:
    """Wait until the streamed reply shows at least `count` words; returns its ts."""

    def enough() -> bool:
        streamed = slack.streamed_messages(channel)
        return bool(streamed) and len(streamed[0].text.split()) >= count

    await wait_until(enough, timeout=10)
    return slack.streamed_messages(channel)[0].ts


async def press_stop(bot: RunningBot, slack: FakeSlack, thread_ts: str, user: str) -> float:
    event = slack.press_stop("C1", thread_ts, user)
    pressed = time.monotonic()
    assert await bot.send_event(event) == 200
    return pressed


async def test_stop_mid_stream_cancels_the_model_and_ends_the_reply(
    native_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Script(text=LONG, tokens_per_second=40))
    root = await native_bot.mention("C1", "write a long essay", fake_slack)
    reply_ts = await shown_words(fake_slack, "C1", 5)
    pressed = await press_stop(native_bot, fake_slack, root, "UALICE")
    await native_bot.idle()

    (played,) = fake_model.played
    assert played.disconnected_at is not None, "the model request was not cancelled"
    assert played.disconnected_at - pressed < 1.0
    sent_tokens = len(played.token_times)
    assert sent_tokens < played.tokens / 2
    await asyncio.sleep(0.5)
    assert len(played.token_times) == sent_tokens, "tokens were still read after the Stop"

    (reply,) = fake_slack.bot_messages("C1")
    assert reply.ts == reply_ts
    body, note = reply.text.rsplit("\n\n", 1)
    assert LONG.startswith(body.strip())
    assert note == ":octagonal_sign: _Stopped by <@UALICE>._"
    assert session_statuses(fake_slack, root)[-1] == "active"
    assert len(fake_model.requests) == 1

    # The next turn's model sees what the person saw of the stopped answer.
    fake_model.script(Script(text="Sure."))
    await native_bot.mention("C1", "shorter please", fake_slack, thread_ts=root)
    await native_bot.idle()
    history = fake_model.requests[-1].body["messages"]
    assistant = [m["content"] for m in history if m["role"] == "assistant"]
    assert assistant == [body.strip()] or assistant == [body]


async def test_stop_withdraws_undecided_proposals_and_the_turn_never_resumes(
    native_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(
        Script(tool_calls=[call("create_task", CREATE, "a"), call("create_task", CREATE, "b")]),
        Script(text="This must never be said."),
    )
    root = await native_bot.mention("C1", "make two tasks", fake_slack)
    await native_bot.idle()
    first, _second = fake_slack.cards("C1")
    assert await native_bot.click(first, cards.APPROVE, "UALICE", "C1") == 200
    await wait_until(lambda: "Done" in card_text(fake_slack.cards("C1")[0]), timeout=10)

    await press_stop(native_bot, fake_slack, root, "UALICE")
    await native_bot.idle()
    done, withdrawn = await proposals(native_bot)
    assert done.state is State.SUCCEEDED
    assert withdrawn.state is State.WITHDRAWN
    assert withdrawn.decided_by == "UALICE"
    await wait_until(lambda: "Withdrawn" in card_text(fake_slack.cards("C1")[1]), timeout=10)
    assert "stopped the turn" in card_text(fake_slack.cards("C1")[1])

    # A late click on the withdrawn card changes nothing.
    assert (
        await native_bot.click_value(withdrawn.id, cards.APPROVE, "UALICE", "C1", fake_slack) == 200
    )
    await native_bot.idle()
    await asyncio.sleep(0.5)
    assert (await proposals(native_bot))[1].state is State.WITHDRAWN
    assert len(fake_model.requests) == 1, "the stopped turn resumed"
    assert all("never be said" not in m.text for m in fake_slack.bot_messages("C1"))
    async with native_bot.countersign.db.transaction() as session:
        audit = (
            await session.scalars(select(AuditEntry).where(AuditEntry.proposal_id == withdrawn.id))
        ).all()
    assert [(a.event, a.actor) for a in audit if a.to_state == "withdrawn"] == [
        ("withdraw", "UALICE")
    ]

    # The thread goes on: the next question is answered, and the model reads the withdrawal.
    fake_model.script(Script(text="Noted."))
    await native_bot.mention("C1", "what happened?", fake_slack, thread_ts=root)
    await native_bot.idle()
    tool_results = [
        json.loads(m["content"])
        for m in fake_model.requests[-1].body["messages"]
        if m["role"] == "tool"
    ]
    assert [r["status"] for r in tool_results] == ["succeeded", "withdrawn"]


async def test_a_write_already_executing_finishes_and_is_recorded(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    bot = await start_bot(make_settings(fake_slack, fake_model, sqlite_url, streaming="auto"))
    try:
        fake_slack.channel_info["CDEV"] = {"id": "CDEV", "name": "dev", "topic": {"value": "a"}}
        fake_slack.delays["conversations.setTopic"] = 1.5
        fake_model.script(
            Script(
                tool_calls=[
                    call("set_channel_topic", {"channel": "CDEV", "topic": "b"}, "t"),
                    call("create_task", CREATE, "c"),
                ]
            ),
            Script(text="This must never be said."),
        )
        root = await bot.mention("C1", "topic and a task", fake_slack)
        await bot.idle()
        topic, _task = fake_slack.cards("C1")
        assert await bot.click(topic, cards.APPROVE, "UALICE", "C1") == 200
        deadline = time.monotonic() + 5
        while (await proposals(bot))[0].state is not State.EXECUTING:
            assert time.monotonic() < deadline, "the approved write never started"
            await asyncio.sleep(0.02)
        assert fake_slack.channel_info["CDEV"]["topic"]["value"] == "a"  # still under way
        await press_stop(bot, fake_slack, root, "UALICE")
        await bot.idle()
        await wait_until(lambda: fake_slack.channel_info["CDEV"]["topic"]["value"] == "b", 10)
        await asyncio.sleep(1.0)
        executed, withdrawn = await proposals(bot)
    finally:
        await stop_bot(bot)
    assert executed.state is State.SUCCEEDED
    assert withdrawn.state is State.WITHDRAWN
    assert len(fake_model.requests) == 1, "the stopped turn resumed after its write finished"


async def test_only_the_person_it_works_for_can_stop_it(
    native_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Script(text=WORDS, tokens_per_second=40))
    root = await native_bot.mention("C1", "eighty words please", fake_slack)
    await shown_words(fake_slack, "C1", 3)
    await press_stop(native_bot, fake_slack, root, "UMALLORY")
    await native_bot.idle()

    (reply,) = fake_slack.bot_messages("C1")
    assert reply.text == WORDS, "the turn went on and its text landed exactly"
    assert fake_model.played[0].disconnected_at is None
    (told,) = fake_slack.ephemerals_for("UMALLORY")
    assert "Nothing was stopped" in told
    assert "<@UALICE>" in told


async def test_a_malformed_stop_event_changes_nothing(
    native_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Script(text=WORDS, tokens_per_second=80))
    root = await native_bot.mention("C1", "eighty words please", fake_slack)
    for broken in (
        {"type": "agent_session_stopped", "channel": "C1", "thread_ts": root},  # no user
        {"type": "agent_session_stopped", "channel": "C1", "user": "UALICE"},  # no thread
        {
            "type": "agent_session_stopped",
            "channel": "C1",
            "thread_ts": root,
            "user": "UALICE",
            "streaming_message_ts": "not a list",
        },
    ):
        assert await native_bot.send_event(broken) == 200
    await native_bot.idle()
    (reply,) = fake_slack.bot_messages("C1")
    assert reply.text == WORDS
    assert fake_model.played[0].disconnected_at is None


async def test_a_stop_reaches_the_replica_running_the_turn(
    migrated_postgres_url: str, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    settings = make_settings(
        fake_slack, fake_model, migrated_postgres_url, streaming="auto", redis_url=REDIS_URL
    )
    running = await start_bot(settings)
    other = await start_bot(settings)
    try:
        for bot in (running, other):
            assert bot.countersign.stopper is not None
            signals = bot.countersign.stopper.signals
            assert isinstance(signals, StopSignals)
            await asyncio.wait_for(signals.ready.wait(), 5)
        fake_model.script(Script(text=LONG, tokens_per_second=40))
        root = await running.mention("C1", "a long essay", fake_slack)
        await shown_words(fake_slack, "C1", 5)
        pressed = await press_stop(other, fake_slack, root, "UALICE")  # Slack told the other
        await running.idle()
        await other.idle()
    finally:
        await stop_bot(running)
        await stop_bot(other)
    (played,) = fake_model.played
    assert played.disconnected_at is not None
    assert played.disconnected_at - pressed < 2.0
    (reply,) = fake_slack.bot_messages("C1")
    assert reply.text.endswith("_Stopped by <@UALICE>._")


async def test_proposals_of_a_stopped_turn_are_kept_from_strangers(
    native_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Script(tool_calls=[call("create_task", CREATE)]), Script(text="Made it."))
    root = await native_bot.mention("C1", "make a task", fake_slack)
    await native_bot.idle()
    await press_stop(native_bot, fake_slack, root, "UMALLORY")
    await native_bot.idle()
    (proposal,) = await proposals(native_bot)
    assert proposal.state is State.PROPOSED
    (card,) = fake_slack.cards("C1")
    assert "Withdrawn" not in card_text(card)
    (told,) = fake_slack.ephemerals_for("UMALLORY")
    assert "Nothing was stopped" in told
    # The turn was not marked stopped either: approved, its task is made and the turn resumes.
    assert await native_bot.click(card, cards.APPROVE, "UALICE", "C1") == 200
    await native_bot.idle()
    await wait_until(lambda: len(fake_model.requests) == 2, 10)
    (proposal,) = await proposals(native_bot)
    assert proposal.state is State.SUCCEEDED
    assert any(m.text == "Made it." for m in fake_slack.bot_messages("C1"))


async def test_an_approver_may_stop_someone_elses_turn(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    bot = await start_bot(
        make_settings(
            fake_slack,
            fake_model,
            sqlite_url,
            streaming="auto",
            approval_policies=json.dumps({"*": {"approvers": ["UBOB"]}}),
        )
    )
    try:
        fake_model.script(Script(text=LONG, tokens_per_second=40))
        root = await bot.mention("C1", "write a long essay", fake_slack)
        await shown_words(fake_slack, "C1", 5)
        await press_stop(bot, fake_slack, root, "UBOB")
        await bot.idle()
    finally:
        await stop_bot(bot)
    assert fake_model.played[0].disconnected_at is not None
    (reply,) = fake_slack.bot_messages("C1")
    assert reply.text.endswith("_Stopped by <@UBOB>._")
