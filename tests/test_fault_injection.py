"""Faults injected through the fakes: a model server that sends garbage, rate-limits or hangs, a
Slack that answers 5xx, resets connections or refuses a card, a database that fails mid-turn.
Promise 4 (every reply finishes, no budget leaks) and promise 6 (bad input changes nothing)."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import pytest
from sqlalchemy import select, update
from sqlalchemy.exc import OperationalError

from bot.conversation.history import is_valid_history
from bot.db.models import Message, Proposal, ProposalState, Role, utcnow
from bot.slack import cards, reply_failures
from tests.fakes.openai import FakeOpenAI, Script, ScriptedToolCall
from tests.fakes.slack import FakeSlack, wait_until
from tests.harness import OPERATOR, RunningBot, make_settings, start_bot, stop_bot
from tests.test_approvals_flow import CREATE, call, tasks_in_db

CURSOR = "▍"


def finished(slack: FakeSlack, channel: str = "C1") -> bool:
    return all(
        CURSOR not in m.text and m.text != "_Thinking…_" for m in slack.bot_messages(channel)
    )


def no_open_replies(bot: RunningBot) -> bool:
    """Every reply gave back its edit-budget slot (a leak would starve the workspace)."""
    return not bot.countersign.budget._open


async def stored(bot: RunningBot) -> list[Message]:
    async with bot.countersign.db.transaction() as session:
        return list((await session.scalars(select(Message).order_by(Message.id))).all())


@pytest.mark.parametrize(
    "garbage",
    ["{not json", json.dumps({"id": "x", "object": "chat.completion.chunk", "choices": "nope"})],
)
async def test_a_malformed_stream_ends_the_reply_with_a_note(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI, garbage: str
) -> None:
    fake_model.script(Script(text="alpha beta gamma delta", raw_after_tokens=(2, garbage)))
    root = await bot.mention("C1", "hello", fake_slack)
    await bot.idle()
    (reply,) = fake_slack.bot_messages("C1")
    assert "could not finish this reply" in reply.text
    assert finished(fake_slack)
    assert no_open_replies(bot)
    fake_model.script(Script(text="Recovered."))
    await bot.mention("C1", "again", fake_slack, thread_ts=root)
    await bot.idle()
    assert fake_slack.bot_messages("C1")[-1].text == "Recovered."
    assert is_valid_history(await stored(bot))


async def test_an_odd_tool_fragment_is_answered_and_changes_nothing(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    odd = json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": "a"}]}}]})
    fake_model.script(Script(text="alpha beta", raw_after_tokens=(1, odd)), Script(text="Done."))
    await bot.mention("C1", "hello", fake_slack)
    await bot.idle()
    assert finished(fake_slack)
    assert no_open_replies(bot)
    messages = await stored(bot)
    assert is_valid_history(messages)
    assert await tasks_in_db(bot) == []


async def test_model_rate_limit_is_explained(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(*[Script(fail_status=429)] * 3)
    await bot.mention("C1", "hello", fake_slack)
    await bot.idle()
    (reply,) = fake_slack.bot_messages("C1")
    assert "rate limiting us (429)" in reply.text
    assert no_open_replies(bot)


async def test_a_database_error_mid_turn_still_finishes_the_reply(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(*_args: object, **_kwargs: object) -> None:
        raise OperationalError(
            "SELECT secret FROM x WHERE password = 'hunter2'", {}, RuntimeError("gone")
        )

    monkeypatch.setattr(bot.countersign.conversations.memory, "prompt_for", broken)
    await bot.mention("C1", "hello", fake_slack)
    await bot.idle()
    (reply,) = fake_slack.bot_messages("C1")
    assert "something went wrong on my side" in reply.text
    assert "hunter2" not in reply.text
    assert "SELECT" not in reply.text
    assert finished(fake_slack)
    assert no_open_replies(bot)
    monkeypatch.undo()
    fake_model.script(Script(text="Fine now."))
    await bot.mention("C1", "again", fake_slack)
    await bot.idle()
    assert fake_slack.bot_messages("C1")[-1].text == "Fine now."


async def test_slack_5xx_and_resets_on_edits_still_land_the_exact_final_text(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    text = " ".join(f"w{i}" for i in range(30))
    fake_model.script(Script(text=text, tokens_per_second=30))
    fake_slack.server_errors["chat.update"] = 4  # beyond the SDK's own two retries
    fake_slack.resets["chat.update"] = 2
    await bot.mention("C1", "hello", fake_slack)
    await bot.idle(timeout=60)
    (reply,) = fake_slack.bot_messages("C1")
    assert reply.text == text
    assert no_open_replies(bot)


async def test_a_final_edit_slack_keeps_refusing_is_finished_by_the_sweeper(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The reply's own retries back off 15 s in all; a tenth of that gives up just the same.
    monkeypatch.setattr(reply_failures, "BACKOFF_SECONDS", 0.05)
    bot = await start_bot(
        make_settings(
            fake_slack, fake_model, sqlite_url, sweep_interval_seconds=0.2, lease_seconds=1
        )
    )
    try:
        fake_model.script(Script(text="the final words", time_to_first_token=0.3))
        fake_slack.server_errors["chat.update"] = 15  # an outage longer than the reply's retries
        await bot.mention("C1", "hello", fake_slack)
        await bot.idle(timeout=60)
        assert fake_slack.bot_messages("C1")[0].text != "the final words"  # not landed yet
        fake_slack.server_errors.clear()  # Slack is back: the sweeper lands the final text
        await wait_until(
            lambda: fake_slack.bot_messages("C1")[0].text == "the final words", timeout=20
        )
        assert no_open_replies(bot)
    finally:
        await stop_bot(bot)


async def test_a_card_slack_refused_is_posted_by_the_sweeper(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    bot = await start_bot(
        make_settings(fake_slack, fake_model, sqlite_url, sweep_interval_seconds=0.2)
    )
    try:
        fake_model.script(Script(tool_calls=[call("create_task", CREATE)]), Script(text="Done."))
        fake_slack.refuse_cards = 1
        await bot.mention("C1", "track it", fake_slack)
        await bot.idle()
        assert fake_slack.cards("C1") == []  # Slack refused it; the sweeper tries again
        await wait_until(lambda: bool(fake_slack.cards("C1")), timeout=20)
        assert len(fake_slack.cards("C1")) == 1
        await bot.click(fake_slack.cards("C1")[0], cards.APPROVE, "UALICE", "C1")
        await bot.idle()
        assert len(await tasks_in_db(bot)) == 1
    finally:
        await stop_bot(bot)


async def test_a_card_whose_poster_died_after_posting_is_not_posted_twice(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    """The poster got the card into Slack and died before recording where it is; once its
    claim lapses, the sweeper finds that card by its metadata instead of posting another."""
    bot = await start_bot(
        make_settings(fake_slack, fake_model, sqlite_url, sweep_interval_seconds=0.2)
    )
    try:
        fake_model.script(Script(tool_calls=[call("create_task", CREATE)]), Script(text="Done."))
        await bot.mention("C1", "track it", fake_slack)
        await bot.idle()
        [card] = fake_slack.cards("C1")
        lapsed = utcnow() - timedelta(seconds=1)
        async with bot.countersign.db.transaction() as session:
            await session.execute(
                update(Proposal).values(
                    card_channel="",
                    card_ts=None,
                    card_version=None,
                    card_claimed_until=lapsed,
                    created_at=utcnow() - timedelta(minutes=5),
                )
            )

        async def recorded() -> str | None:
            async with bot.countersign.db.transaction() as session:
                return (await session.scalars(select(Proposal.card_ts))).one()

        for _ in range(200):  # the sweeper runs every 0.2 s
            if await recorded() is not None:
                break
            await asyncio.sleep(0.1)
        assert await recorded() == card.ts
        assert len(fake_slack.cards("C1")) == 1
        await bot.click(card, cards.APPROVE, "UALICE", "C1")
        await bot.idle()
        assert len(await tasks_in_db(bot)) == 1
    finally:
        await stop_bot(bot)


async def test_tool_calls_from_quirky_servers_get_one_answer_each(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """No index, the name and id repeated in every fragment; and elsewhere two calls that share
    one id: every call is still answered by exactly one tool message with an id of its own."""
    quirky = [
        ScriptedToolCall("same", "list_tasks", json.dumps({"status": "open"})),
        ScriptedToolCall("other", "get_task", json.dumps({"task_id": 1})),
    ]
    fake_model.script(
        Script(tool_calls=quirky, quirky_tool_calls=True),
        Script(
            tool_calls=[
                call("list_tasks", {"status": "any"}, "dup"),
                call("get_task", {"task_id": 2}, "dup"),
            ]
        ),
        Script(text="Done."),
    )
    await bot.mention("C1", "look around", fake_slack)
    await bot.idle()
    messages = await stored(bot)
    assert is_valid_history(messages)
    calls = [m for m in messages if m.tool_calls]
    assert [c["function"]["name"] for c in calls[0].tool_calls or []] == ["list_tasks", "get_task"]
    ids = [c["id"] for m in calls for c in m.tool_calls or []]
    assert len(ids) == len(set(ids)) == 4
    results = [str(m.tool_call_id) for m in messages if m.role == Role.TOOL]
    assert sorted(results) == sorted(ids)


async def test_tool_calls_beyond_the_round_cap_are_answered_not_run(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    bot = await start_bot(
        make_settings(fake_slack, fake_model, sqlite_url, max_tool_calls_per_round=2)
    )
    try:
        many = [call("create_task", {**CREATE, "title": f"t{i}"}, f"c{i}") for i in range(5)]
        fake_model.script(Script(tool_calls=many), Script(text="ok"))
        await bot.mention("C1", "create five", fake_slack)
        await bot.idle()
        async with bot.countersign.db.transaction() as session:
            proposals = (await session.scalars(select(Proposal))).all()
        assert len(proposals) == 2
        assert all(p.state == ProposalState.PROPOSED for p in proposals)
        messages = await stored(bot)
        refused = [m for m in messages if m.role == Role.TOOL and m.content]
        assert len(refused) == 3
        assert all("too many tool calls" in (m.content or "") for m in refused)
        assert is_valid_history(messages)
    finally:
        await stop_bot(bot)


async def _sample(bot: RunningBot, name: str, **labels: str) -> float:
    """One sample of the bot's /metrics, 0 when absent."""
    from prometheus_client.parser import text_string_to_metric_families

    async with bot.session.get(bot.url + "/metrics", headers=OPERATOR) as response:
        text = await response.text()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    return 0.0


async def test_metrics_show_what_happened(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Script(tool_calls=[call("create_task", CREATE)]), Script(text="Done."))
    await bot.mention("C1", "track it", fake_slack)
    await bot.idle()
    acks_before = await _sample(bot, "countersign_slack_ack_seconds_count", kind="interaction")
    await bot.click(fake_slack.cards("C1")[0], cards.APPROVE, "UALICE", "C1")
    await bot.idle()
    await asyncio.sleep(0.3)  # one loop-lag sample at least
    async with bot.session.get(bot.url + "/metrics", headers=OPERATOR) as response:
        assert response.status == 200
        text = await response.text()
    # The click's acknowledgement was timed, and the loop's lateness is being sampled.
    acks = await _sample(bot, "countersign_slack_ack_seconds_count", kind="interaction")
    assert acks == acks_before + 1
    assert await _sample(bot, "countersign_event_loop_lag_seconds_count") >= 1
    assert 'countersign_executions_total{outcome="succeeded"}' in text
    assert 'countersign_decisions_total{action="approve",result="accepted"}' in text
    assert 'countersign_turns_total{outcome="paused"}' in text
    assert "countersign_model_first_token_seconds_count" in text
    assert "xoxb-" not in text


@pytest.mark.postgres
async def test_a_database_restart_costs_no_reply(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, migrated_postgres_url: str
) -> None:
    """Every connection the bot holds is cut (what a PostgreSQL restart does to clients); the
    next turn reconnects and answers."""
    import asyncpg
    from sqlalchemy.engine import make_url

    bot = await start_bot(make_settings(fake_slack, fake_model, migrated_postgres_url))
    try:
        fake_model.script(Script(text="Before."), Script(text="After."))
        await bot.mention("C1", "one", fake_slack)
        await bot.idle()
        url = make_url(migrated_postgres_url)
        admin = await asyncpg.connect(
            host=url.host, port=url.port or 5432, user=url.username, database="postgres"
        )
        try:
            cut = await admin.fetchval(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = $1 AND pid <> pg_backend_pid()",
                url.database,
            )
        finally:
            await admin.close()
        assert cut >= 1
        await bot.mention("C1", "two", fake_slack)
        await bot.idle()
        assert [m.text for m in fake_slack.bot_messages("C1")] == ["Before.", "After."]
    finally:
        await stop_bot(bot)
