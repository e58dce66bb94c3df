"""The board itself: a workspace's tasks, as the model reads them, and who may read one."""

from __future__ import annotations

from datetime import date
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from bot.db.models import Task
from bot.membership import reach_of
from bot.tools.packs.task_audience import audiences as _audiences
from bot.tools.registry import ToolContext


def task_ref(task_id: int) -> str:
    return f"TASK-{task_id}"


def task_link(ctx: ToolContext, task_id: int) -> str | None:
    """A signed link that expires, for this workspace only; None without `PUBLIC_BASE_URL`."""
    return ctx.links.url(f"/tasks/{task_id}", ctx.team_id) if ctx.links else None


def as_json(task: Task) -> dict[str, Any]:
    return {
        "id": task.id,
        "ref": task_ref(task.id),
        "title": task.title,
        "description": task.description,
        "assignee": task.assignee,
        "due_date": task.due_date,
        "priority": task.priority,
        "status": task.status,
    }


async def task_in(session: AsyncSession, ctx: ToolContext, task_id: int) -> Task:
    """The workspace's task `task_id` (another workspace's tasks do not exist here)."""
    task = await session.get(Task, task_id)
    if task is None or task.team_id != ctx.team_id:
        raise LookupError(f"there is no task {task_ref(task_id)}")
    return task


async def load_readable(ctx: ToolContext, task_id: int) -> Task:
    """The task, if the requester may read it (its audience: `task_audience`)."""
    async with ctx.db.transaction() as session:
        task = await task_in(session, ctx, task_id)
        audience = (await _audiences(session, [task]))[task.id]
    if not await reach_of(ctx.slack).may_read(ctx.requester, audience):
        raise LookupError(f"there is no task {task_ref(task_id)}")
    return task


def due(value: date | None) -> str | None:
    return value.isoformat() if value else None


def due_words(value: str | None) -> str:
    if not value:
        return ""
    day = date.fromisoformat(value)
    return f", due {day.strftime('%A')} {value}"
