"""Who may read a task on the board: the audience of the proposal that created it."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bot.db.models import Proposal, Task
from bot.membership import reach_of
from bot.tools.registry import ToolContext


async def audiences(session: AsyncSession, tasks: Sequence[Task]) -> dict[int, str | None]:
    """Who may read each task: the audience of the proposal that created it (the channel it
    was asked for in, narrowed by what that turn had read); a task made otherwise is the
    workspace's."""
    keys = [t.idempotency_key for t in tasks if t.idempotency_key]
    found: dict[str, str | None] = {}
    if keys:
        rows = await session.execute(
            select(Proposal.idempotency_key, Proposal.audience).where(
                Proposal.idempotency_key.in_(keys)
            )
        )
        found = {key: audience for key, audience in rows.all()}
    return {t.id: found.get(t.idempotency_key or "") for t in tasks}


async def readable(
    ctx: ToolContext, tasks: Sequence[Task], audiences: dict[int, str | None]
) -> list[Task]:
    reach = reach_of(ctx.slack)
    return [t for t in tasks if await reach.may_read(ctx.requester, audiences[t.id])]
