"""Turns paused at a budget's limit, and their one way back: `resume_paused` moves a pause
from `paused` to `resumed` (compare-and-set) and puts the turn in the resume outbox
(`ResumeRequest`, kind `budget:<pause id>`) in the same transaction, so whoever acts first
(the requester choosing the cheaper model, an approved raise) resumes it, and only once."""

from __future__ import annotations

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.db.models import BudgetPause, Message, ResumeRequest, utcnow

PAUSED, RESUMED, ABANDONED = "paused", "resumed", "abandoned"
KIND = "budget:"  # ResumeRequest.kind of a budget pause: "budget:<pause id>"


def pause_of(kind: str) -> int | None:
    """The pause a resume request continues, or None if it is not a budget pause's."""
    if not kind.startswith(KIND):
        return None
    try:
        return int(kind.removeprefix(KIND))
    except ValueError:
        return None


async def resume_paused(
    session: AsyncSession,
    pause_id: int,
    *,
    model: str | None,
    decided_by: str,
    card_ts: str | None = None,
) -> BudgetPause | None:
    """Resume a paused turn (on `model`, if given, instead of the configured one). None if it
    was no longer paused (someone acted first, or it was abandoned): nothing is queued.

    `card_ts` is the card a click came from: the turn records its card's ts after posting it
    (with other turns' writes), so a quick click can arrive first; the card is known all the
    same, and kept where none is recorded yet."""
    result = await session.execute(
        update(BudgetPause)
        .where(BudgetPause.id == pause_id, BudgetPause.state == PAUSED)
        .values(
            state=RESUMED,
            model=model,
            decided_by=decided_by,
            resumed_at=utcnow(),
            version=BudgetPause.version + 1,
            card_ts=func.coalesce(BudgetPause.card_ts, card_ts),
        )
    )
    if getattr(result, "rowcount", 0) != 1:
        return None
    pause = await session.get(BudgetPause, pause_id)
    if pause is None or pause.conversation_id is None:
        return None  # the conversation was forgotten meanwhile
    anchor = await session.scalar(  # the outbox names a message of the turn: its latest
        select(Message.id)
        .where(Message.conversation_id == pause.conversation_id)
        .order_by(Message.id.desc())
        .limit(1)
    )
    if anchor is None:
        return None
    session.add(
        ResumeRequest(
            conversation_id=pause.conversation_id,
            assistant_message_id=anchor,
            kind=f"{KIND}{pause.id}",
        )
    )
    return pause
