"""Group commit (issue 28, the bot's own cost): many turns' small writes share a transaction and
a few statements, and each still gets exactly what its one-at-a-time form would have written.
On SQLite and PostgreSQL, through the real drivers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import event, select
from sqlalchemy.ext.asyncio import AsyncSession

from bot.conversation.live_replies import LiveReplies
from bot.db import repositories as repo
from bot.db.histories import LOAD_HISTORY, Wanted
from bot.db.models import (
    Conversation,
    ConversationSummary,
    LiveReply,
    Message,
    Participant,
    Role,
)
from bot.db.session import Database
from bot.db.turn_writes import (
    ADD_USER_MESSAGE,
    CLAIM_AND_OPEN,
    OPEN_CONVERSATION,
    SET_TITLE,
    ClaimedStart,
    ThreadStart,
    Title,
    UserMessage,
)


@pytest.fixture
async def db(migrated_database_url: str) -> AsyncIterator[Database]:
    database = Database.from_url(migrated_database_url)
    yield database
    await database.dispose()


def counting(db: Database) -> dict[str, int]:
    """How many transactions were committed and statements executed from now on."""
    counts = {"commits": 0, "statements": 0}

    def commit(_connection: Any) -> None:
        counts["commits"] += 1

    def statement(*_args: Any) -> None:
        counts["statements"] += 1

    event.listen(db.engine.sync_engine, "commit", commit)
    event.listen(db.engine.sync_engine, "before_cursor_execute", statement)
    return counts


async def participants(db: Database, conversation_id: int) -> set[str]:
    async with db.transaction() as session:
        rows = await session.scalars(
            select(Participant.user_id).where(Participant.conversation_id == conversation_id)
        )
        return set(rows.all())


async def test_sixty_turns_open_conversations_and_store_messages_in_a_few_statements(
    db: Database,
) -> None:
    async with db.transaction() as session:  # one thread exists already
        known, _ = await repo.get_or_create_conversation(session, "T1", "C1", "1.0", "UBOB")
    counts = counting(db)
    starts = [ThreadStart("T1", f"C{i}", "1.0", f"U{i}") for i in range(1, 61)]

    async def turn(start: ThreadStart) -> tuple[Conversation, bool]:
        opened = await db.group.add(OPEN_CONVERSATION, start)
        message = UserMessage(opened[0].id, "hello", "2.0", start.started_by, "C:x", None)
        await db.group.add(ADD_USER_MESSAGE, message)
        return opened

    opened = await asyncio.gather(*[turn(s) for s in starts])
    assert [created for _, created in opened] == [False] + [True] * 59
    assert opened[0][0].id == known.id
    assert len({c.id for c, _ in opened}) == 60
    # one-at-a-time: 60 x (find, insert, participant) + 60 x (message, participant, counter),
    # each in a transaction of its own
    assert counts["commits"] <= 4, counts
    assert counts["statements"] <= 20, counts
    async with db.transaction() as session:
        stored = (await session.scalars(select(Message).order_by(Message.id))).all()
        conversations = {c.id: c for c in (await session.scalars(select(Conversation))).all()}
    assert len(stored) == 60
    assert {(m.role, m.content, m.audience, m.slack_ts) for m in stored} == {
        (Role.USER, "hello", "C:x", "2.0")
    }
    assert all(conversations[c.id].message_count == 1 for c, _ in opened)
    assert await participants(db, known.id) == {"UBOB", "U1"}
    assert await participants(db, opened[5][0].id) == {"U6"}


async def test_two_starts_of_one_new_thread_open_it_once(db: Database) -> None:
    start = ThreadStart("T1", "C1", "1.0", "UALICE")
    again = ThreadStart("T1", "C1", "1.0", "UBOB")
    first, second = await asyncio.gather(
        db.group.add(OPEN_CONVERSATION, start), db.group.add(OPEN_CONVERSATION, again)
    )
    assert first[0].id == second[0].id
    assert (first[1], second[1]) == (True, False)
    assert first[0].started_by == "UALICE"
    assert await participants(db, first[0].id) == {"UALICE"}


async def test_messages_to_one_conversation_count_each(db: Database) -> None:
    conversation, _ = await db.group.add(OPEN_CONVERSATION, ThreadStart("T1", "C1", "1", "UA"))
    await asyncio.gather(
        *[
            db.group.add(
                ADD_USER_MESSAGE, UserMessage(conversation.id, f"m{i}", f"{i}.0", "UA", "", None)
            )
            for i in range(5)
        ]
    )
    async with db.transaction() as session:
        row = await session.get(Conversation, conversation.id)
        assert row is not None
        assert row.message_count == 5


async def test_a_stored_message_reads_back_its_history_in_the_same_write(
    db: Database,
) -> None:
    """What a turn reads with its own message's write is what a read after it gives: the
    newest messages after the latest summary, its own last; a writer that does not ask reads
    nothing."""
    async with db.transaction() as session:
        busy, _ = await repo.get_or_create_conversation(session, "T1", "C1", "1", "UA")
        for i in range(6):
            await repo.add_message(session, busy, Role.USER, f"earlier {i}")
        quiet, _ = await repo.get_or_create_conversation(session, "T1", "C2", "1", "UB")
    asked = [
        UserMessage(busy.id, "newest", "9.0", "UA", "", None, history=4),
        UserMessage(quiet.id, "hello", "9.1", "UB", "", None, history=100),
        UserMessage(quiet.id, "not asking", "9.2", "UB", "", None),
    ]
    read = await asyncio.gather(*[db.group.add(ADD_USER_MESSAGE, m) for m in asked])
    assert read[2] is None
    after = await asyncio.gather(
        db.reads.add(LOAD_HISTORY, Wanted(busy.id, 4)),
        db.reads.add(LOAD_HISTORY, Wanted(quiet.id, 100)),
    )
    got = read[0]
    assert got is not None
    assert [m.content for m in got[1]] == ["earlier 3", "earlier 4", "earlier 5", "newest"]
    assert [m.id for m in got[1]] == [m.id for m in after[0][1]]
    assert read[1] is not None
    # the three were written in one batch: the read after all of them sees both of them
    assert [m.content for m in read[1][1]] == ["hello", "not asking"]
    assert [m.id for m in read[1][1]] == [m.id for m in after[1][1]]


async def test_a_delivery_is_claimed_once_and_only_its_claim_opens_a_conversation(
    db: Database,
) -> None:
    """Two deliveries of one message (its `app_mention` and its `message` event, or Slack's
    retry) in one batch and a later one: the first wins and opens the conversation, the
    others are duplicates; a claim sharing any key with an earlier one loses; a new thread
    whose only claim lost is not opened."""
    alice = ThreadStart("T1", "C1", "1.0", "UALICE")
    mention = ClaimedStart(("msg:T1:C1:1.0", "evt:E1"), alice)
    message = ClaimedStart(("msg:T1:C1:1.0", "evt:E2"), alice)
    other = ClaimedStart(("msg:T1:C2:1.0",), ThreadStart("T1", "C2", "1.0", "UBOB"))
    first, second, third = await asyncio.gather(
        *[db.group.add(CLAIM_AND_OPEN, c) for c in (mention, message, other)]
    )
    assert first is not None
    assert third is not None
    assert second is None
    assert first[1] is True
    assert third[1] is True
    assert first[0].id != third[0].id
    retried = await db.group.add(CLAIM_AND_OPEN, mention)
    assert retried is None
    lost = ClaimedStart(("evt:E1", "msg:T1:C9:1.0"), ThreadStart("T1", "C9", "1.0", "UEVE"))
    assert await db.group.add(CLAIM_AND_OPEN, lost) is None
    async with db.transaction() as session:
        channels = (await session.scalars(select(Conversation.channel_id))).all()
    assert sorted(channels) == ["C1", "C2"]
    # a second message in an open thread is claimed and finds its conversation
    later = ClaimedStart(("msg:T1:C1:2.0",), ThreadStart("T1", "C1", "1.0", "UBOB"))
    found = await db.group.add(CLAIM_AND_OPEN, later)
    assert found is not None
    assert (found[0].id, found[1]) == (first[0].id, False)


async def test_writers_of_one_batch_meet_again_in_the_next(db: Database) -> None:
    """Ten turns each open their conversation, then store their message; one is a moment
    ahead of the others. Its first write has a transaction of its own; after that it must not
    keep one to itself at every step while the nine wait behind it: the nine's next writes
    join its next one (three transactions, not four)."""

    async def turn(n: int) -> None:
        opened, _ = await db.group.add(OPEN_CONVERSATION, ThreadStart("T1", f"C{n}", "1", "U"))
        message = UserMessage(opened.id, "hello", "2.0", "U", "", None)
        await db.group.add(ADD_USER_MESSAGE, message)

    counts = counting(db)
    first = asyncio.create_task(turn(0))
    await asyncio.sleep(0)  # its transaction has begun, alone
    await asyncio.gather(first, *[turn(n) for n in range(1, 10)])
    assert counts["commits"] == 3, counts


async def test_first_words_never_replace_a_title(db: Database) -> None:
    a, _ = await db.group.add(OPEN_CONVERSATION, ThreadStart("T1", "C1", "1", "UA"))
    b, _ = await db.group.add(OPEN_CONVERSATION, ThreadStart("T1", "C2", "1", "UA"))
    await db.group.add(SET_TITLE, Title(a.id, "Model title", only_if_unnamed=False))
    await asyncio.gather(
        db.group.add(SET_TITLE, Title(a.id, "first words a", only_if_unnamed=True)),
        db.group.add(SET_TITLE, Title(b.id, "first words b", only_if_unnamed=True)),
    )
    async with db.transaction() as session:
        titles = {c.id: c.title for c in (await session.scalars(select(Conversation))).all()}
    assert titles == {a.id: "Model title", b.id: "first words b"}


async def test_a_failing_write_fails_alone_and_the_others_are_committed(db: Database) -> None:
    conversation, _ = await db.group.add(OPEN_CONVERSATION, ThreadStart("T1", "C1", "1", "UA"))

    async def broken(session: AsyncSession) -> None:
        session.add(Message(conversation_id=conversation.id + 1000, role=Role.USER, content="x"))
        await session.flush()  # no such conversation: a foreign key violation
        raise AssertionError("unreachable")

    async def fine(session: AsyncSession) -> int:
        stored = await repo.add_message(session, conversation, Role.USER, "kept")
        return stored.id

    results = await asyncio.gather(
        db.group.run(fine), db.group.run(broken), db.group.run(fine), return_exceptions=True
    )
    assert isinstance(results[0], int)
    assert isinstance(results[2], int)
    assert isinstance(results[1], Exception)
    async with db.transaction() as session:
        contents = (await session.scalars(select(Message.content))).all()
    assert contents == ["kept", "kept"]


async def test_histories_read_together_are_what_each_reads_alone(db: Database) -> None:
    """The latest summary of each conversation and at most `limit` of the newest messages
    after it, oldest first: as `messages_after` reads one conversation."""
    async with db.transaction() as session:
        conversations = []
        for n in range(3):
            conversation, _ = await repo.get_or_create_conversation(
                session, "T1", f"C{n}", "1", "UA"
            )
            conversations.append(conversation)
        for i in range(12):
            for n, conversation in enumerate(conversations):
                await repo.add_message(session, conversation, Role.USER, f"c{n} m{i}")
        middle = (await session.scalars(select(Message.id).where(Message.content == "c1 m5"))).one()
        for upto, text in ((middle - 30, "old"), (middle, "newest summary")):
            session.add(
                ConversationSummary(
                    conversation_id=conversations[1].id,
                    upto_message_id=upto,
                    summary=text,
                    messages_summarised=1,
                    tokens_before=1,
                    tokens_after=1,
                )
            )
    wanted = [Wanted(conversations[0].id, 4), Wanted(conversations[1].id, 100)]
    wanted.append(Wanted(conversations[2].id, 0))
    together = await asyncio.gather(*[db.reads.add(LOAD_HISTORY, w) for w in wanted])
    async with db.transaction() as session:
        alone = [
            await repo.messages_after(session, conversations[0].id, 0, 4),
            await repo.messages_after(session, conversations[1].id, middle, 100),
            [],
        ]
    assert [[m.id for m in messages] for _, messages in together] == [
        [m.id for m in messages] for messages in alone
    ]
    assert [m.content for m in together[0][1]] == [f"c0 m{i}" for i in range(8, 12)]
    assert together[1][1][0].content == "c1 m6"
    summaries = [summary.summary if summary else None for summary, _ in together]
    assert summaries == [None, "newest summary", None]


async def test_live_replies_store_what_each_showed_in_one_statement(db: Database) -> None:
    journal = LiveReplies(db, "worker-1")
    other = LiveReplies(db, "worker-2")
    await asyncio.gather(*[journal.opened("C1", f"{n}.0") for n in range(3)])
    await other.opened("C1", "9.0")
    for n in range(3):
        journal.shown(f"{n}.0", f"text {n}")
    other.shown("9.0", "not mine to write")
    other._pending.clear()
    counts = counting(db)
    await journal.flush()
    await journal.stop()
    await other.stop()
    assert counts["statements"] <= 4, counts  # BEGIN, the texts, the leases, COMMIT
    async with db.transaction() as session:
        rows = (await session.scalars(select(LiveReply).order_by(LiveReply.ts))).all()
    assert [(r.ts, r.shown) for r in rows] == [
        ("0.0", "text 0"),
        ("1.0", "text 1"),
        ("2.0", "text 2"),
        ("9.0", ""),
    ]


async def test_callers_are_not_left_waiting_when_the_writer_is_cancelled(db: Database) -> None:
    inside = asyncio.Event()

    async def slow(_session: AsyncSession) -> None:
        inside.set()
        await asyncio.Event().wait()  # never done: the writer is cancelled meanwhile

    async def quick(_session: AsyncSession) -> int:
        return 1

    first = asyncio.ensure_future(db.group.run(slow))
    await inside.wait()
    second = asyncio.ensure_future(db.group.run(quick))  # queued behind the slow one
    writer = db.group._writer  # the task under test
    assert writer is not None
    writer.cancel()
    done, _ = await asyncio.wait({first, second}, timeout=10)
    assert done == {first, second}
    assert first.cancelled()
    assert second.cancelled()
    assert await db.group.run(quick) == 1  # a new writer serves the next write
