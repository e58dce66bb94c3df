"""Turns paused at a budget's limit, and their one way back: `resume_paused` moves a pause
from `paused` to `resumed` (compare-and-set) and puts the turn in the resume outbox
(`ResumeRequest`, kind `budget:<pause id>`) in the same transaction, so whoever acts first
(the requester choosing the cheaper model, an approved raise) resumes it, and only once.

A pause lives as long as the window it stopped in: once that window resets (`window_reset`)
nobody may resume it (a turn from last week would answer a question nobody waits for, and a
raise of last week's limit frees nothing), and `abandon_paused` ends it, by the same
compare-and-set, so a resume and an abandonment racing at midnight end it once."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.db.models import BudgetPause, Message, ResumeRequest, utcnow
from bot.spend.budget_model import Budget
from bot.spend.windows import window_named

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
    pause = await _move(
        session, pause_id, RESUMED, card_ts, model=model, decided_by=decided_by, resumed_at=utcnow()
    )
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


def window_reset(pause: BudgetPause, now: datetime, budgets: list[Budget], timezone: str) -> bool:
    """Whether the window the pause stopped in has reset by `now`: when the pause keeps it,
    its own `resets_at`; a pause stored before that was kept reads its budget's window in the
    policy in force (none there: not known to have reset). A turn window never resets."""
    resets = pause.resets_at
    if resets is None:
        budget = next((b for b in budgets if b.name == pause.budget), None)
        if budget is not None:
            resets = window_named(budget, timezone, pause.window_key).resets_at
    return resets is not None and resets <= now


async def abandon_paused(
    session: AsyncSession, pause_id: int, note: str, card_ts: str | None = None
) -> BudgetPause | None:
    """End a paused turn without resuming it (compare-and-set, as `resume_paused`); None if
    it was no longer paused. `card_ts`: the card a click came from, kept where none is
    recorded yet."""
    return await _move(session, pause_id, ABANDONED, card_ts, note=note)


async def _move(
    session: AsyncSession, pause_id: int, state: str, card_ts: str | None, **values: Any
) -> BudgetPause | None:
    """A paused turn moved to `state` with `values` (compare-and-set on `paused`, the version
    bumped, the click's card kept where none is recorded yet); None if it was no longer
    paused."""
    result = await session.execute(
        update(BudgetPause)
        .where(BudgetPause.id == pause_id, BudgetPause.state == PAUSED)
        .values(
            state=state,
            version=BudgetPause.version + 1,
            card_ts=func.coalesce(BudgetPause.card_ts, card_ts),
            **values,
        )
    )
    if getattr(result, "rowcount", 0) != 1:
        return None
    return await session.get(BudgetPause, pause_id)
