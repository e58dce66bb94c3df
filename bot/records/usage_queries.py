"""A person's own model usage, for /usage and the App Home: the tokens of the answers given to
their requests (each assistant message keeps the usage the server reported and who asked),
summed over today, this week and this month as the budgets' calendar reads them (in the
policy file's time zone, weeks from Monday).

Only conversations the person took part in and that changed since the month began are read
(both indexed), so the sum never walks the whole messages table.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from sqlalchemy import case, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from bot.db.models import Conversation, Message, Participant, Role

PERIODS = ("day", "week", "month")
RECENT_CHANNELS = 5


@dataclass(frozen=True)
class Used:
    prompt: int = 0
    completion: int = 0

    @property
    def total(self) -> int:
        return self.prompt + self.completion


def period_starts(now: datetime, timezone: str) -> dict[str, datetime]:
    """When the current day, ISO week and month began in `timezone` (aware)."""
    zone = ZoneInfo(timezone)
    today = now.astimezone(zone).date()
    monday = today - timedelta(days=today.weekday())

    def midnight(day: date) -> datetime:  # zoneinfo gives each wall time its own offset
        return datetime(day.year, day.month, day.day, tzinfo=zone)

    return {
        "day": midnight(today),
        "week": midnight(monday),
        "month": midnight(today.replace(day=1)),
    }


async def own_usage(
    session: AsyncSession, team_id: str, user: str, starts: dict[str, datetime]
) -> dict[str, Used]:
    """What the answers to `user`'s requests used since each start in `starts`."""
    since = min(starts.values())
    mine = select(Participant.conversation_id).where(Participant.user_id == user)
    columns = []
    for period in PERIODS:
        recent = Message.created_at >= starts[period]
        columns += [
            func.sum(case((recent, func.coalesce(Message.prompt_tokens, 0)), else_=0)),
            func.sum(case((recent, func.coalesce(Message.completion_tokens, 0)), else_=0)),
        ]
    row = (
        await session.execute(
            select(*columns)
            .select_from(Message)
            .join(Conversation, Conversation.id == Message.conversation_id)
            .where(
                Conversation.id.in_(mine),
                Conversation.team_id == team_id,
                Conversation.updated_at >= since,
                Message.role == Role.ASSISTANT,
                Message.requester == user,
                Message.created_at >= since,
            )
        )
    ).one()
    sums = [int(value or 0) for value in row]
    return {period: Used(sums[2 * i], sums[2 * i + 1]) for i, period in enumerate(PERIODS)}


async def recent_channels(
    session: AsyncSession, team_id: str, user: str, limit: int = RECENT_CHANNELS
) -> list[str]:
    """The channels (and DMs) where `user` last talked with the bot, newest first: the Home
    shows the channel budgets of these."""
    rows = await session.execute(
        select(Conversation.channel_id, func.max(Conversation.updated_at).label("last"))
        .join(Participant, Participant.conversation_id == Conversation.id)
        .where(Participant.user_id == user, Conversation.team_id == team_id)
        .group_by(Conversation.channel_id)
        .order_by(func.max(Conversation.updated_at).desc())
        .limit(limit)
    )
    return [channel for channel, _ in rows.all()]
