"""/history, /approvals, the App Home, forgetting and retention, for a seeded database: what
each person sees, page by page, and that nobody sees anybody else's."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import func, select, update

from bot.db import repositories as repo
from bot.db.models import (
    AuditEntry,
    Conversation,
    Message,
    ProcessedEvent,
    Proposal,
    ProposalState,
    Role,
    utcnow,
)
from bot.slack import cards
from bot.slack import record_views as views
from bot.slack.record_lines import decider, tool_words
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack, wait_until
from tests.harness import RunningBot, clean_env, make_settings, run_cli, start_bot, stop_bot
from tests.test_approvals_flow import CREATE, call


async def seed(
    bot: RunningBot, user: str, count: int, channel: str = "C1", titled: bool = True
) -> list[int]:
    """`count` conversations started by `user`, oldest first, each with two messages (the
    answer posted in the thread) and a title."""
    ids = []
    for i in range(count):
        async with bot.countersign.db.transaction() as session:
            conversation, _ = await repo.get_or_create_conversation(
                session, "T0TEST", channel, f"1700{i:06d}.000100", user
            )
            await repo.add_message(
                session,
                conversation,
                Role.USER,
                f"{user} question {i} about deploys",
                slack_user=user,
                slack_ts=f"1700{i:06d}.000100",
            )
            await repo.add_message(
                session,
                conversation,
                Role.ASSISTANT,
                f"answer {i}",
                prompt_tokens=10,
                completion_tokens=5,
                slack_ts=f"1700{i:06d}.000200",
            )
            await session.execute(
                update(Conversation)
                .where(Conversation.id == conversation.id)
                .values(
                    updated_at=utcnow() - timedelta(hours=count - i),
                    title=f"Deploy plan {i}" if titled else None,
                )
            )
            ids.append(conversation.id)
    return ids


async def answer(bot: RunningBot, slack: FakeSlack, key: str) -> dict[str, Any]:
    await wait_until(lambda: bool(slack.answers(key)), timeout=10)
    await bot.idle()
    return slack.answers(key)[-1]


def text_of(blocks: list[dict[str, Any]]) -> str:
    return json.dumps(blocks, ensure_ascii=False)


def texts(blocks: Any) -> list[str]:
    """Every text a person reads in these blocks."""
    if isinstance(blocks, list):
        return [t for b in blocks for t in texts(b)]
    if not isinstance(blocks, dict):
        return []
    found = [blocks["text"]] if isinstance(blocks.get("text"), str) else []
    return found + [
        t for k, v in blocks.items() if k != "text" or not isinstance(v, str) for t in texts(v)
    ]


def looks_like_json(text: str) -> bool:
    return any(mark in text for mark in ('{"', '":', "[{", "\\u"))


async def test_history_lists_pages_and_the_empty_case(
    bot: RunningBot, fake_slack: FakeSlack
) -> None:
    await seed(bot, "UALICE", 12)
    status, seconds, key = await bot.command(fake_slack, "/history", "", "UALICE")
    assert status == 200
    assert seconds < 3.0  # within Slack's 3 s (not the work's time): answered through response_url
    first = await answer(bot, fake_slack, key)
    assert first["response_type"] == "ephemeral"
    shown = text_of(first["blocks"])
    assert "(page 1)" in shown
    assert "question" not in shown  # a list of conversations, not their content
    rows = [
        b for b in first["blocks"] if b.get("accessory", {}).get("action_id") == views.HISTORY_OPEN
    ]
    assert len(rows) == 10
    newest = text_of(rows[0:1])
    # Its title, linked to the bot's answer inside the thread (opens the thread there).
    assert (
        "*<https://test.slack.com/archives/C1/p1700000011000200"
        "?thread_ts=1700000011.000100&cid=C1|Deploy plan 11>*"
    ) in newest
    assert "in <#C1> · last activity <!date^" in newest
    assert "^{date_pretty} at {time}|" in newest  # each viewer's own time zone
    assert "· 2 messages" in newest
    assert not any(looks_like_json(t) for t in texts(first["blocks"]))
    nav = [e["action_id"] for b in first["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert nav == [f"{views.HISTORY_PAGE}_next"]
    key = await bot.press(fake_slack, first["blocks"], f"{views.HISTORY_PAGE}_next", "UALICE")
    second = await answer(bot, fake_slack, key)
    assert second["replace_original"] is True
    assert "(page 2)" in text_of(second["blocks"])
    assert len([b for b in second["blocks"] if b.get("accessory")]) == 2
    nav = [
        e["action_id"] for b in second["blocks"] if b["type"] == "actions" for e in b["elements"]
    ]
    assert nav == [f"{views.HISTORY_PAGE}_prev"]

    _, _, key = await bot.command(fake_slack, "/history", "", "UNOBODY")
    empty = await answer(bot, fake_slack, key)
    assert views.EMPTY_HISTORY in text_of(empty["blocks"])


async def test_nobody_sees_anybody_elses_conversations(
    bot: RunningBot, fake_slack: FakeSlack
) -> None:
    alice = await seed(bot, "UALICE", 2)
    await seed(bot, "UBOB", 1, channel="C2")
    _, _, key = await bot.command(fake_slack, "/history", "", "UBOB")
    bobs = text_of((await answer(bot, fake_slack, key))["blocks"])
    assert "C2" in bobs
    assert "C1" not in bobs
    # A forged button and a link to Alice's thread show Bob nothing.
    key = await bot.press(fake_slack, [], views.HISTORY_OPEN, "UBOB", value=str(alice[0]))
    assert "not one you can see" in text_of((await answer(bot, fake_slack, key))["blocks"])
    link = "https://test.slack.com/archives/C1/p1700000000000100"
    _, _, key = await bot.command(fake_slack, "/history", link, "UBOB")
    assert "no conversation of yours" in text_of((await answer(bot, fake_slack, key))["blocks"])
    _, _, key = await bot.command(fake_slack, "/history", "search question", "UBOB")
    found = text_of((await answer(bot, fake_slack, key))["blocks"])
    assert "UALICE question" not in found
    assert "UBOB question 0" in found


async def test_history_of_one_thread_shows_messages_tools_and_actions(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    long_answer = "word " * 200
    fake_model.script(
        Script(text="Let me add it.", tool_calls=[call("create_task", CREATE)]),
        Script(text=long_answer),
    )
    root = await bot.mention("C1", "track the login bug", fake_slack)
    await bot.idle()
    await bot.click(fake_slack.cards("C1")[0], cards.APPROVE, "UALICE", "C1")
    await bot.idle()
    link = f"<https://test.slack.com/archives/C1/p{root.replace('.', '')}>"
    _, _, key = await bot.command(fake_slack, "/history", link, "UALICE")
    detail = await answer(bot, fake_slack, key)
    shown = text_of(detail["blocks"])
    assert "<@UALICE>" in shown
    assert "track the login bug" in shown
    async with bot.countersign.db.transaction() as session:
        answer_row = (await session.scalars(select(Message).order_by(Message.id.desc()))).first()
    assert answer_row is not None
    assert answer_row.prompt_tokens
    assert answer_row.completion_tokens
    tokens = answer_row.prompt_tokens + answer_row.completion_tokens
    assert f"· {tokens} tokens" in shown  # token usage per message
    assert f"?thread_ts={root}&cid=C1|track the login bug>*" in shown  # titled, linked
    assert "Let me add it. _(using Create task)_" in shown  # the call, by its label
    # What the bot did, in words: the proposal and who decided it.
    assert "proposed Create task 'Fix login bug'" in shown
    assert "→ *succeeded* by <@UALICE>" in shown
    assert "create_task" not in shown
    assert not any(looks_like_json(t) for t in texts(detail["blocks"]))
    key = await bot.press(fake_slack, detail["blocks"], views.HISTORY_FULL, "UALICE")
    full = await answer(bot, fake_slack, key)
    assert text_of(full["blocks"]).count("word") == 200
    # Someone else cannot read it through a forged "Full text" button.
    async with bot.countersign.db.transaction() as session:
        last = await session.scalar(select(func.max(Message.id)))
    key = await bot.press(fake_slack, [], views.HISTORY_FULL, "UMALLORY", value=str(last))
    assert "not one you can see" in text_of((await answer(bot, fake_slack, key))["blocks"])


async def test_approvals_and_the_home_tab(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    _, _, key = await bot.command(fake_slack, "/approvals", "", "UALICE")
    empty = text_of((await answer(bot, fake_slack, key))["blocks"])
    assert "Nothing is waiting for you." in empty
    fake_model.script(Script(tool_calls=[call("create_task", CREATE)]))
    await bot.mention("C1", "track it", fake_slack)
    await bot.idle()
    _, _, key = await bot.command(fake_slack, "/approvals", "", "UALICE")
    waiting = text_of((await answer(bot, fake_slack, key))["blocks"])
    card = fake_slack.cards("C1")[0]
    # The card's link opens it in its thread, beside the answer; the thread is named too.
    card_link = f"https://test.slack.com/archives/C1/p{card.ts.replace('.', '')}"
    assert f"{card_link}?thread_ts={card.thread_ts}&cid=C1|the card>" in waiting
    assert "asked by <@UALICE> in <https://test.slack.com/archives/C1/p" in waiting
    assert "|track it> · expires <!date^" in waiting
    assert "Create task 'Fix login bug'" in waiting
    _, _, key = await bot.command(fake_slack, "/approvals", "", "UBOB")
    assert "Nothing is waiting for you." in text_of((await answer(bot, fake_slack, key))["blocks"])

    body = {
        "type": "app_home_opened",
        "user": "UALICE",
        "channel": "D1",
        "tab": "home",
        "event_ts": "1.0",
    }
    await bot.send_event(body)
    await bot.idle()
    home = fake_slack.home_of("UALICE")
    assert home is not None
    assert home["type"] == "home"
    assert "Waiting for you" in text_of(home["blocks"])
    assert "Your recent work" in text_of(home["blocks"])
    published = len(fake_slack.published)
    await bot.click(card, cards.APPROVE, "UALICE", "C1")
    await bot.idle()
    assert len(fake_slack.published) > published  # refreshed when the proposal changed
    refreshed = text_of(fake_slack.home_of("UALICE")["blocks"])  # type: ignore[index]
    assert "Nothing is waiting for you." in refreshed
    assert "*succeeded*" in refreshed
    await bot.send_event({**body, "user": "UBOB"})
    await bot.idle()
    bobs = text_of(fake_slack.home_of("UBOB")["blocks"])  # type: ignore[index]
    assert "Fix login bug" not in bobs


async def test_forget_removes_only_ones_own_words_and_keeps_the_audit_trail(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Script(tool_calls=[call("create_task", CREATE)]))
    await bot.mention("C1", "track it", fake_slack)
    await bot.idle()
    await bot.click(fake_slack.cards("C1")[0], cards.APPROVE, "UALICE", "C1")
    await bot.idle()
    fake_model.script(Script(tool_calls=[call("create_task", CREATE)]))
    await bot.mention("C1", "and again", fake_slack)  # this one stays undecided
    await bot.idle()
    # A thread Alice shares with Bob: her words go, his stay.
    fake_model.script(Script(text="Answer to Alice."), Script(text="Answer to Bob."))
    shared = await bot.mention("C3", "alice asks", fake_slack)
    await bot.idle()
    await bot.mention("C3", "bob asks too", fake_slack, user="UBOB", thread_ts=shared)
    await bot.idle()
    await seed(bot, "UBOB", 2, channel="C2")
    _, _, key = await bot.command(fake_slack, "/history", "forget", "UALICE")
    prompt = await answer(bot, fake_slack, key)
    button = next(e for b in prompt["blocks"] if b["type"] == "actions" for e in b["elements"])
    assert button["confirm"]["title"]["text"] == "Delete your conversations?"
    key = await bot.press(fake_slack, prompt["blocks"], views.HISTORY_FORGET, "UALICE")
    done = await answer(bot, fake_slack, key)
    assert "Deleted 2 conversation(s) only you took part in" in done["text"]
    assert "1 message(s) of yours in threads shared with others" in done["text"]
    async with bot.countersign.db.transaction() as session:
        starters = (await session.scalars(select(Conversation.started_by))).all()
        proposals = (await session.scalars(select(Proposal).order_by(Proposal.id))).all()
        audit = (await session.scalars(select(AuditEntry).order_by(AuditEntry.id))).all()
        words = (await session.scalars(select(Message.content).order_by(Message.id))).all()
    assert sorted(starters) == ["UALICE", "UBOB", "UBOB"]  # the shared thread stays
    async with bot.countersign.db.transaction() as session:
        shared_title = await session.scalar(
            select(Conversation.title).where(Conversation.channel_id == "C3")
        )
    assert shared_title is None  # it was made of Alice's words
    assert "alice asks" not in words
    assert "bob asks too" in words
    assert "Answer to Bob." in words
    executed, undecided = proposals  # both kept, redacted; the undecided one expired first
    assert executed.state == ProposalState.SUCCEEDED
    assert undecided.state == ProposalState.EXPIRED
    for kept in proposals:
        assert kept.description == "[redacted]"
        assert kept.arguments == {"redacted": True}
        assert kept.arguments_hash  # the hash of what was proposed survives
        assert kept.conversation_id is None
    assert [a.event for a in audit] == [
        "propose",
        "approve",
        "start",
        "succeed",
        "propose",
        "expire",
    ]
    assert all(a.detail == {"redacted": True} for a in audit)


async def test_history_hides_other_peoples_tool_work_and_channels_one_left(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """Bob wrote once in Alice's thread: he sees what was said in Slack, not the results of
    the tools that ran for Alice; and once he leaves the private channel, nothing at all."""
    fake_slack.channel_info["GSECRET"] = {"id": "GSECRET", "name": "secret", "is_private": True}
    fake_slack.members["GSECRET"] = ["UALICE", "UBOB", "UBOT"]
    fake_model.script(
        Script(tool_calls=[call("list_tasks", {"status": "any"})]),
        Script(text="There are no tasks."),
        Script(text="Hi Bob."),
    )
    root = await bot.mention("GSECRET", "what is on the board?", fake_slack)
    await bot.idle()
    await bot.mention("GSECRET", "hello", fake_slack, user="UBOB", thread_ts=root)
    await bot.idle()
    async with bot.countersign.db.transaction() as session:
        tool_message = (
            await session.scalars(select(Message).where(Message.role == Role.TOOL))
        ).one()
    link = f"<https://test.slack.com/archives/GSECRET/p{root.replace('.', '')}>"

    async def history_of(user: str) -> str:
        _, _, key = await bot.command(fake_slack, "/history", link, user)
        return text_of((await answer(bot, fake_slack, key))["blocks"])

    alice, bob = await history_of("UALICE"), await history_of("UBOB")
    assert "used List tasks, 0 tasks" in alice  # the read, in words
    assert "List tasks" not in bob
    assert "only they can see it" in bob
    assert "what is on the board?" in bob  # it was posted in Slack, where Bob could read it
    key = await bot.press(fake_slack, [], views.HISTORY_FULL, "UBOB", value=str(tool_message.id))
    assert "not one you can see" in text_of((await answer(bot, fake_slack, key))["blocks"])
    fake_slack.members["GSECRET"] = ["UALICE", "UBOT"]  # Bob left the channel
    assert bot.countersign.records is not None
    bot.countersign.records.access.reach.forget()
    assert "not one you can see" in await history_of("UBOB")
    # His list still says a conversation was there, not what it was about.
    _, _, key = await bot.command(fake_slack, "/history", "", "UBOB")
    listed = text_of((await answer(bot, fake_slack, key))["blocks"])
    assert "A conversation" in listed
    assert "what is on the board" not in listed
    _, _, key = await bot.command(fake_slack, "/history", "", "UALICE")
    assert "what is on the board?" in text_of((await answer(bot, fake_slack, key))["blocks"])


async def test_retention_purge_removes_only_what_is_old(
    bot: RunningBot, fake_slack: FakeSlack, sqlite_url: str, tmp_path: Path
) -> None:
    ids = await seed(bot, "UALICE", 3)
    async with bot.countersign.db.transaction() as session:
        await session.execute(
            update(Conversation)
            .where(Conversation.id == ids[0])
            .values(updated_at=utcnow() - timedelta(days=100))
        )
    env = clean_env(
        SLACK_BOT_TOKEN="xoxb-1", OPENAI_API_KEY="k", DATABASE_URL=sqlite_url, RETENTION_DAYS="90"
    )
    result = run_cli(["purge"], env, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "removed 1 conversation(s) idle for more than 90 days" in result.stdout
    async with bot.countersign.db.transaction() as session:
        left = (await session.scalars(select(Conversation.id).order_by(Conversation.id))).all()
        messages = await session.scalar(select(func.count()).select_from(Message))
    assert list(left) == ids[1:]
    assert messages == 4


async def test_delivery_keys_are_forgotten_even_when_conversations_are_kept_forever(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    """RETENTION_DAYS=0 keeps conversations; the running bot still forgets delivery keys older
    than a week (they only stop Slack's retries, minutes apart), so the table cannot grow
    without end, and keeps the recent ones that still stop a retry."""
    settings = make_settings(
        fake_slack, fake_model, sqlite_url, retention_days=0, sweep_interval_seconds=0.1
    )
    bot = await start_bot(settings)
    try:
        old_conversation = (await seed(bot, "UALICE", 1))[0]
        async with bot.countersign.db.transaction() as session:
            session.add(ProcessedEvent(key="evt:old", created_at=utcnow() - timedelta(days=8)))
            session.add(ProcessedEvent(key="evt:recent", created_at=utcnow() - timedelta(hours=1)))
            await session.execute(
                update(Conversation)
                .where(Conversation.id == old_conversation)
                .values(updated_at=utcnow() - timedelta(days=3000))
            )
        await stop_bot(bot)
        bot = await start_bot(settings)  # the hourly clean-up runs at start-up

        async def keys() -> set[str]:
            async with bot.countersign.db.transaction() as session:
                return set((await session.scalars(select(ProcessedEvent.key))).all())

        for _ in range(100):
            if "evt:old" not in await keys():
                break
            await asyncio.sleep(0.05)
        assert "evt:old" not in await keys()
        assert "evt:recent" in await keys()
        async with bot.countersign.db.transaction() as session:
            assert await session.get(Conversation, old_conversation) is not None
    finally:
        await stop_bot(bot)


def test_tool_work_is_told_in_words_and_hostile_results_stay_inert() -> None:
    """What a tool (an MCP server's included) returned never shows as JSON, and whatever it
    put in its keys, errors or provenance cannot ping, link or mark up the record."""

    def tool(name: str, content: Any, source: str | None = None) -> Message:
        body = content if isinstance(content, str) or content is None else json.dumps(content)
        return Message(role=Role.TOOL, tool_name=name, content=body, source=source)

    read = tool(
        "get_recent_messages",
        {"messages": [{"text": "a"}, {"text": "b"}, {"text": "c"}]},
        "get_recent_messages: messages of #general by @Bob",
    )
    assert tool_words(read, None) == "read messages of #general by @Bob, 3 messages"
    single = tool("list_tasks", {"tasks": [{"id": 1}]})
    assert tool_words(single, None) == "used List tasks, 1 task"
    mcp = tool("notes__search", {"<!channel> hits": [1, 2]}, 'notes__search {"q": "x"}')
    shown = tool_words(mcp, None)
    assert shown.startswith("used Notes search, 2 ")
    assert "<!channel>" not in shown
    assert "&lt;!channel&gt;" in shown
    failed = tool("lookup_user", {"status": "error", "error": "no <!here> <@U1> person"})
    assert (
        tool_words(failed, None)
        == "used Lookup user, it failed: no &lt;!here&gt; &lt;@U1&gt; person"
    )
    sneaky = tool("get_issue", "not json {", "get_issue: issue <https://evil.example|acme#1>")
    # shown in full, never a link: a zero-width space where Slack would draw one
    assert tool_words(sneaky, None) == "read issue &lt;https:\u200b//evil.\u200bexample|acme#1&gt;"
    for message in (read, single, mcp, failed, sneaky):
        assert not looks_like_json(tool_words(message, None))


def test_who_decided_reads_in_words_never_as_a_key() -> None:
    assert decider("UBOB") == "<@UBOB>"
    assert decider("policy:small-tasks") == "the rule “small-tasks”"
    assert decider("grant:12") == "a standing grant"
    assert "12" not in decider("grant:12")
