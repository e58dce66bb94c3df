"""The writes every turn makes before it asks the model, done for many turns at once.

When many replies start together, their turns' writes meet in one transaction
(`bot.db.group_commit`); these kinds write all of a batch's in a few statements whatever its
size: conversations found or opened, users' messages stored, titles set. Each does what its
one-at-a-time form in `bot.db.repositories` does (`get_or_create_conversation`,
`add_message` for a user's message) and is tested against it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Table, bindparam, insert, select, tuple_, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.db import repositories as repo
from bot.db.claims import winners
from bot.db.group_commit import Together
from bot.db.histories import History, Wanted, load_histories
from bot.db.models import Conversation, Message, Participant, Role, utcnow
from bot.db.repositories import _insert_ignoring_conflicts

Key = tuple[str, str, str]  # team, channel, thread ts
# The table itself: an UPDATE of many rows by id as one executemany (Core, not the ORM's
# bulk update, which sets values and cannot add to a counter).
CONVERSATIONS: Table = Conversation.__table__  # type: ignore[assignment]


@dataclass(frozen=True)
class ThreadStart:
    """A conversation to find, or open for `started_by`."""

    team_id: str
    channel_id: str
    thread_ts: str
    started_by: str

    @property
    def key(self) -> Key:
        return (self.team_id, self.channel_id, self.thread_ts)


async def _find(session: AsyncSession, keys: Sequence[Key]) -> dict[Key, Conversation]:
    if not keys:
        return {}
    columns = tuple_(Conversation.team_id, Conversation.channel_id, Conversation.thread_ts)
    rows = await session.scalars(select(Conversation).where(columns.in_(list(keys))))
    return {(c.team_id, c.channel_id, c.thread_ts): c for c in rows.all()}


async def _add_participants(session: AsyncSession, pairs: Sequence[tuple[int, str]]) -> None:
    unique = list(dict.fromkeys(pairs))
    if unique:
        await session.execute(
            _insert_ignoring_conflicts(session)(Participant)
            .values([{"conversation_id": c, "user_id": u} for c, u in unique])
            .on_conflict_do_nothing(index_elements=["conversation_id", "user_id"])
        )


async def open_conversations(
    session: AsyncSession, starts: Sequence[ThreadStart]
) -> list[tuple[Conversation, bool]]:
    """Each thread's conversation, created if needed (True: this call created it; of two
    starts of one new thread, the first)."""
    keys = list(dict.fromkeys(s.key for s in starts))
    found = await _find(session, keys)
    first = {s.key: s for s in reversed(starts)}  # the first start of each thread
    missing = [first[k] for k in keys if k not in found]
    created: dict[Key, Conversation] = {}
    if missing:
        now = utcnow()
        rows = await session.scalars(
            _insert_ignoring_conflicts(session)(Conversation)
            .values(
                [
                    {
                        "team_id": s.team_id,
                        "channel_id": s.channel_id,
                        "thread_ts": s.thread_ts,
                        "started_by": s.started_by,
                        "created_at": now,
                        "updated_at": now,
                        "message_count": 0,
                        "prompt_tokens": 0,
                        "completion_tokens": 0,
                    }
                    for s in missing
                ]
            )
            .on_conflict_do_nothing(index_elements=["team_id", "channel_id", "thread_ts"])
            .returning(Conversation)
        )
        created = {(c.team_id, c.channel_id, c.thread_ts): c for c in rows.all()}
        found |= created
        late = [s.key for s in missing if s.key not in created]  # another worker's, just now
        found |= await _find(session, late)
        await _add_participants(session, [(c.id, first[k].started_by) for k, c in created.items()])
    out: list[tuple[Conversation, bool]] = []
    for start in starts:
        new = start.key in created and first[start.key] is start
        out.append((found[start.key], new))
    return out


OPEN_CONVERSATION = Together[ThreadStart, tuple[Conversation, bool]](
    "open conversation", open_conversations
)


@dataclass(frozen=True)
class ClaimedStart:
    """A delivery to claim (`bot.db.claims`: all of its keys, or it is a duplicate) and, if
    it is this one's, its thread's conversation to find or open."""

    keys: tuple[str, ...]
    start: ThreadStart


async def claim_and_open(
    session: AsyncSession, claims: Sequence[ClaimedStart]
) -> list[tuple[Conversation, bool] | None]:
    """Each claim's conversation as `open_conversations` gives it; None for a duplicate (a
    key recorded before, or by an earlier claim of this batch). A message addressed to the
    bot needs both before its placeholder: as one write they cost its turn one round trip,
    not two (at 60 replies at once each waits for a loop busy with the others)."""
    inserted = await repo.record_new_keys(session, [k for c in claims for k in c.keys])
    won = [i for i, w in enumerate(winners([c.keys for c in claims], inserted)) if w]
    out: list[tuple[Conversation, bool] | None] = [None] * len(claims)
    starts = [claims[i].start for i in won]
    for index, found in zip(won, await open_conversations(session, starts), strict=True):
        out[index] = found
    return out


CLAIM_AND_OPEN = Together[ClaimedStart, tuple[Conversation, bool] | None](
    "claim and open", claim_and_open
)


@dataclass(frozen=True)
class UserMessage:
    """A person's message, as `add_message(..., Role.USER, ...)` stores it."""

    conversation_id: int
    text: str
    slack_ts: str
    slack_user: str
    audience: str
    source: str | None
    history: int = 0  # > 0: read back the conversation's history (at most so many messages)


async def add_user_messages(
    session: AsyncSession, messages: Sequence[UserMessage]
) -> list[History | None]:
    """The messages, their writers as participants and their conversations' counters: three
    statements for any number. Then, for each message that asks (`history`), its
    conversation's history as `bot.db.histories` reads it, in the same transaction: the turn
    that stored it asks the model next and needs it (a read of its own after the commit was
    one more round trip, each waiting on a loop busy with every other turn: at 60 replies at
    once about 130 ms before each model request)."""
    now = utcnow()
    await session.execute(
        insert(Message),
        [
            {
                "conversation_id": m.conversation_id,
                "role": Role.USER,
                "content": m.text,
                "slack_ts": m.slack_ts,
                "slack_user": m.slack_user,
                "audience": m.audience,
                "source": m.source,
                "created_at": now,
            }
            for m in messages
        ],
    )
    await _add_participants(
        session, [(m.conversation_id, m.slack_user) for m in messages if m.slack_user]
    )
    table = CONVERSATIONS
    await session.execute(
        update(table)
        .where(table.c.id == bindparam("conversation"))
        .values(message_count=table.c.message_count + 1, updated_at=bindparam("now")),
        [{"conversation": m.conversation_id, "now": now} for m in messages],
    )
    asking = [i for i, m in enumerate(messages) if m.history > 0]
    if not asking:
        return [None] * len(messages)
    wanted = [Wanted(messages[i].conversation_id, messages[i].history) for i in asking]
    histories: list[History | None] = [None] * len(messages)
    for i, history in zip(asking, await load_histories(session, wanted), strict=True):
        histories[i] = history
    return histories


ADD_USER_MESSAGE = Together[UserMessage, History | None]("add user message", add_user_messages)


@dataclass(frozen=True)
class Title:
    conversation_id: int
    title: str
    only_if_unnamed: bool  # the first words: they never replace a title


async def set_titles(session: AsyncSession, titles: Sequence[Title]) -> list[None]:
    table = CONVERSATIONS
    for unnamed in (True, False):
        rows = [t for t in titles if t.only_if_unnamed is unnamed]
        if not rows:
            continue
        query = update(table).where(table.c.id == bindparam("conversation"))
        if unnamed:
            query = query.where(table.c.title.is_(None))
        await session.execute(
            query.values(title=bindparam("words")),
            [{"conversation": t.conversation_id, "words": t.title[:200]} for t in rows],
        )
    return [None] * len(titles)


SET_TITLE = Together[Title, None]("set title", set_titles)
