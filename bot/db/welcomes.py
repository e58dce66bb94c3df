"""The welcome's one row per person: claimed before the welcome is posted (so two replicas, or
a restart in between, never post it twice), released if posting failed (so it is tried again
at the next open)."""

from __future__ import annotations

from sqlalchemy import delete
from sqlalchemy.exc import IntegrityError

from bot.db.models import Welcome
from bot.db.session import Database


async def claim_welcome(db: Database, team_id: str, user_id: str) -> bool:
    """True for the one caller that may welcome this person; False once anyone did."""
    try:
        async with db.transaction() as session:
            if await session.get(Welcome, (team_id, user_id)) is not None:
                return False
            session.add(Welcome(team_id=team_id, user_id=user_id))
            await session.flush()
    except IntegrityError:  # another replica claimed it between the look and the insert
        return False
    return True


async def release_welcome(db: Database, team_id: str, user_id: str) -> None:
    async with db.transaction() as session:
        await session.execute(
            delete(Welcome).where(Welcome.team_id == team_id, Welcome.user_id == user_id)
        )
