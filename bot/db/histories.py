"""The history every turn reads before it asks the model, read for many turns at once.

When many replies start together their turns' reads meet in one snapshot
(`Database.reads`, a `bot.db.group_commit` over `Database.reading`), and this kind reads all
of them in two statements: the latest summary of each conversation, and the newest messages
after it. It reads what `Memory` read one conversation at a time (the latest summary, then at
most `limit` of the newest messages after it, oldest first).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import and_, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from bot.db.group_commit import Together
from bot.db.models import ConversationSummary, Message

History = tuple[ConversationSummary | None, list[Message]]


@dataclass(frozen=True)
class Wanted:
    conversation_id: int
    limit: int  # of the newest messages after the summary


async def load_histories(session: AsyncSession, wanted: Sequence[Wanted]) -> list[History]:
    ids = list(dict.fromkeys(w.conversation_id for w in wanted))
    latest = (
        select(func.max(ConversationSummary.id))
        .where(ConversationSummary.conversation_id.in_(ids))
        .group_by(ConversationSummary.conversation_id)
    )
    summaries = {
        s.conversation_id: s
        for s in (
            await session.scalars(
                select(ConversationSummary).where(ConversationSummary.id.in_(latest))
            )
        ).all()
    }
    after = {c: summaries[c].upto_message_id if c in summaries else 0 for c in ids}
    rank = (
        func.row_number()
        .over(partition_by=Message.conversation_id, order_by=Message.id.desc())
        .label("rank")
    )
    newer = or_(*(and_(Message.conversation_id == c, Message.id > a) for c, a in after.items()))
    ranked = select(Message, rank).where(newer).subquery()
    newest = aliased(Message, ranked)
    limit = max(w.limit for w in wanted)
    rows = await session.scalars(select(newest).where(ranked.c.rank <= limit).order_by(ranked.c.id))
    found: defaultdict[int, list[Message]] = defaultdict(list)
    for message in rows.all():
        found[message.conversation_id].append(message)
    return [
        (summaries.get(w.conversation_id), found[w.conversation_id][-w.limit :] if w.limit else [])
        for w in wanted
    ]


LOAD_HISTORY = Together[Wanted, History]("load history", load_histories)
