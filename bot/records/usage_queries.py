"""A person's own model usage, for /usage and the App Home: the tokens of the answers given to
their requests (each assistant message keeps the usage the server reported, the model that
gave it and who asked), summed per model over today, this week and this month as the budgets'
calendar reads them (in the policy file's time zone, weeks from Monday); and the usage of each
turn, for /history.

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
    prompt: int = 0  # cached prompt tokens included, as the server reports them
    completion: int = 0
    cached: int = 0  # of `prompt`, those read from the server's cache

    @property
    def total(self) -> int:
        return self.prompt + self.completion

    def __add__(self, other: Used) -> Used:
        return Used(
            self.prompt + other.prompt,
            self.completion + other.completion,
            self.cached + other.cached,
        )


# What one model used: None names rows stored before messages recorded their model (the
# configured model's price is theirs).
ByModel = dict[str | None, Used]


def total(by_model: ByModel) -> Used:
    return sum(by_model.values(), Used())


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
) -> dict[str, ByModel]:
    """What the answers to `user`'s requests used since each start in `starts`, per model."""
    since = min(starts.values())
    mine = select(Participant.conversation_id).where(Participant.user_id == user)
    columns = []
    for period in PERIODS:
        recent = Message.created_at >= starts[period]
        columns += [
            func.sum(case((recent, func.coalesce(column, 0)), else_=0))
            for column in (Message.prompt_tokens, Message.completion_tokens, Message.cached_tokens)
        ]
    rows = await session.execute(
        select(Message.model, *columns)
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
        .group_by(Message.model)
    )
    used: dict[str, ByModel] = {period: {} for period in PERIODS}
    for model, *sums in rows.all():
        for i, period in enumerate(PERIODS):
            prompt, completion, cached = (int(v or 0) for v in sums[3 * i : 3 * i + 3])
            if prompt or completion:
                used[period][model] = Used(prompt, completion, cached)
    return used


async def turn_usage(session: AsyncSession, conversation_id: int) -> dict[int, ByModel]:
    """Each turn's usage (its answers' sum, per model), keyed by the turn's last answer with a
    usage: a turn is the model answers to one person's request (its tool rounds, and a paused
    turn's resumed answers, are one turn). What someone else writes in the thread meanwhile
    (context the bot reads but does not answer) does not end it: an answer starts a new turn
    only where its requester wrote since the answer before (or, for rows that name no
    requester, anyone did). Only turns of more than one answer are listed: an answer's own
    usage is its turn's otherwise."""
    rows = await session.execute(
        select(
            Message.id,
            Message.role,
            Message.slack_user,
            Message.requester,
            Message.model,
            Message.prompt_tokens,
            Message.completion_tokens,
            Message.cached_tokens,
        )
        .where(Message.conversation_id == conversation_id)
        .where(Message.role.in_([Role.USER, Role.ASSISTANT]))
        .order_by(Message.id)
    )
    turns: dict[int, ByModel] = {}
    answers: list[tuple[int, str | None, Used]] = []
    wrote: set[str | None] = set()  # who wrote since the last answer

    def close() -> None:
        if len(answers) > 1:
            summed: ByModel = {}
            for _, model, used in answers:
                summed[model] = summed.get(model, Used()) + used
            turns[answers[-1][0]] = summed
        answers.clear()

    for message_id, role, user, requester, model, prompt, completion, cached in rows.all():
        if role == Role.USER:
            wrote.add(user)
            continue
        if wrote and (requester is None or requester in wrote):
            close()  # a new request
        wrote.clear()
        if prompt or completion:
            answers.append((message_id, model, Used(prompt or 0, completion or 0, cached or 0)))
    close()
    return turns


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
