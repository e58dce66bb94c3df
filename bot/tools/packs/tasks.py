"""`tasks`: a team task board kept in the bot's own database.

Writes take the proposal's idempotency key, so running the same approved call twice (a retry
after a crash, say) creates one task, not two.
"""

from __future__ import annotations

from datetime import date
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from bot.audience import narrowest_of
from bot.db.models import Task, TaskComment, utcnow
from bot.membership import reach_of
from bot.tools.packs.task_audience import audiences as _audiences
from bot.tools.packs.task_audience import readable as _readable
from bot.tools.registry import Change, Outcome, Preview, ToolContext, read_tool, write_tool

PACK = "tasks"

Status = Literal["open", "in_progress", "done"]
Priority = Literal["low", "normal", "high", "urgent"]


# The board's own limits (its columns, bot/db/models): a Slack user id fits 32 characters, a
# task id a 32-bit integer; titles, descriptions and comments are capped where the board shows
# them whole.
USER_ID = r"^[UW][A-Z0-9]{2,}$"
USER_MAX = 32
TASK_ID_MAX = 2**31 - 1
TITLE_MAX = 200
TEXT_MAX = 4000


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class ListTasks(_Args):
    """Find tasks on the team board."""

    status: Literal["open", "in_progress", "done", "any"] = Field(
        "any", description="only tasks in this status"
    )
    assignee: str | None = Field(
        None, max_length=USER_MAX, description="Slack user id, e.g. U012ABC"
    )
    text: str | None = Field(
        None, max_length=TITLE_MAX, description="words to look for in title or description"
    )
    limit: int = Field(20, ge=1, le=100)


class GetTask(_Args):
    task_id: int = Field(ge=1, le=TASK_ID_MAX)


class CreateTask(_Args):
    title: str = Field(min_length=1, max_length=TITLE_MAX)
    description: str = Field("", max_length=TEXT_MAX)
    assignee: str | None = Field(
        None, pattern=USER_ID, max_length=USER_MAX, description="Slack user id"
    )
    due_date: date | None = Field(None, description="YYYY-MM-DD")
    priority: Priority = "normal"


class UpdateTask(_Args):
    task_id: int = Field(ge=1, le=TASK_ID_MAX)
    title: str | None = Field(None, min_length=1, max_length=TITLE_MAX)
    description: str | None = Field(None, max_length=TEXT_MAX)
    assignee: str | None = Field(None, pattern=USER_ID, max_length=USER_MAX)
    due_date: date | None = None
    priority: Priority | None = None
    status: Status | None = None


class CloseTask(_Args):
    task_id: int = Field(ge=1, le=TASK_ID_MAX)


class CommentOnTask(_Args):
    task_id: int = Field(ge=1, le=TASK_ID_MAX)
    body: str = Field(min_length=1, max_length=TEXT_MAX)


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


async def _task_in(session: AsyncSession, ctx: ToolContext, task_id: int) -> Task:
    """The workspace's task `task_id` (another workspace's tasks do not exist here)."""
    task = await session.get(Task, task_id)
    if task is None or task.team_id != ctx.team_id:
        raise LookupError(f"there is no task {task_ref(task_id)}")
    return task


async def _load(ctx: ToolContext, task_id: int) -> Task:
    """The task, if the requester may read it (its audience: `task_audience`)."""
    async with ctx.db.transaction() as session:
        task = await _task_in(session, ctx, task_id)
        audience = (await _audiences(session, [task]))[task.id]
    if not await reach_of(ctx.slack).may_read(ctx.requester, audience):
        raise LookupError(f"there is no task {task_ref(task_id)}")
    return task


def _due(value: date | None) -> str | None:
    return value.isoformat() if value else None


def _due_words(value: str | None) -> str:
    if not value:
        return ""
    day = date.fromisoformat(value)
    return f", due {day.strftime('%A')} {value}"


@read_tool("list_tasks", "List tasks on the team's board.", ListTasks, label="Looking up tasks")
async def list_tasks(args: ListTasks, ctx: ToolContext) -> Outcome:
    query = select(Task).where(Task.team_id == ctx.team_id)
    if args.status != "any":
        query = query.where(Task.status == args.status)
    if args.assignee:
        query = query.where(Task.assignee == args.assignee)
    if args.text:
        like = f"%{args.text}%"
        query = query.where(or_(Task.title.ilike(like), Task.description.ilike(like)))
    async with ctx.db.transaction() as session:
        found = (await session.scalars(query.order_by(Task.id).limit(args.limit * 5))).all()
        audiences = await _audiences(session, found)
    tasks = (await _readable(ctx, found, audiences))[: args.limit]
    return Outcome(
        {"tasks": [as_json(t) for t in tasks]},
        f"{len(tasks)} task(s)",
        audience=narrowest_of(audiences[t.id] for t in tasks),
    )


@read_tool("get_task", "Read one task by its id.", GetTask, label="Reading a task")
async def get_task(args: GetTask, ctx: ToolContext) -> Outcome:
    task = await _load(ctx, args.task_id)
    async with ctx.db.transaction() as session:
        audience = (await _audiences(session, [task]))[task.id]
        comments = (
            await session.scalars(
                select(TaskComment).where(TaskComment.task_id == task.id).order_by(TaskComment.id)
            )
        ).all()
    data = as_json(task) | {"comments": [{"author": c.author, "body": c.body} for c in comments]}
    return Outcome(
        {"task": data}, task_ref(task.id), task_link(ctx, task.id), audience=audience or None
    )


async def _preview_create(args: CreateTask, ctx: ToolContext) -> Preview:
    who = await ctx.user_label(args.assignee)
    assigned = f" assigned to {who}" if args.assignee else ""
    return Preview(
        f"Create task '{args.title}'{assigned}{_due_words(_due(args.due_date))}",
        (
            Change("title", None, args.title),
            Change("description", None, args.description or None),
            Change("assignee", None, who if args.assignee else None),
            Change("due date", None, _due(args.due_date)),
            Change("priority", None, args.priority),
        ),
    )


@write_tool(
    "create_task",
    "Create a task on the team's board (a person must approve it first).",
    CreateTask,
    preview=_preview_create,
    finds_earlier_write=True,
)
async def create_task(args: CreateTask, ctx: ToolContext) -> Outcome:
    async with ctx.db.transaction() as session:
        if ctx.idempotency_key:
            existing = await session.scalar(
                select(Task).where(Task.idempotency_key == ctx.idempotency_key)
            )
            if existing is not None:  # the same approved call, run again: no second task
                return Outcome(
                    {"task": as_json(existing)},
                    f"Created {task_ref(existing.id)}",
                    task_link(ctx, existing.id),
                )
        task = Task(
            team_id=ctx.team_id,
            title=args.title,
            description=args.description,
            assignee=args.assignee,
            due_date=_due(args.due_date),
            priority=args.priority,
            status="open",
            created_by=ctx.requester,
            idempotency_key=ctx.idempotency_key,
        )
        session.add(task)
        await session.flush()
    return Outcome({"task": as_json(task)}, f"Created {task_ref(task.id)}", task_link(ctx, task.id))


_FIELDS = ("title", "description", "assignee", "due_date", "priority", "status")


async def _field_value(ctx: ToolContext, name: str, value: Any) -> str | None:
    if value is None or value == "":
        return None
    if name == "assignee":
        return await ctx.user_label(str(value))
    if isinstance(value, date):
        return value.isoformat()
    return str(value)


async def _preview_update(args: UpdateTask, ctx: ToolContext) -> Preview:
    task = await _load(ctx, args.task_id)
    changes = []
    for name in _FIELDS:
        new = getattr(args, name)
        if new is None:
            continue
        old = getattr(task, name)
        changes.append(
            Change(
                name.replace("_", " "),
                await _field_value(ctx, name, old),
                await _field_value(ctx, name, new),
            )
        )
    what = ", ".join(c.field for c in changes) or "nothing"
    return Preview(f"Update {task_ref(task.id)} '{task.title}': {what}", tuple(changes))


@write_tool(
    "update_task",
    "Change fields of a task (a person must approve it first). Leave fields null to keep them.",
    UpdateTask,
    preview=_preview_update,
)
async def update_task(args: UpdateTask, ctx: ToolContext) -> Outcome:
    async with ctx.db.transaction() as session:
        task = await _task_in(session, ctx, args.task_id)
        for name in _FIELDS:
            value = getattr(args, name)
            if value is not None:
                setattr(task, name, _due(value) if name == "due_date" else value)
        task.updated_at = utcnow()
    return Outcome({"task": as_json(task)}, f"Updated {task_ref(task.id)}", task_link(ctx, task.id))


async def _preview_close(args: CloseTask, ctx: ToolContext) -> Preview:
    task = await _load(ctx, args.task_id)
    return Preview(
        f"Close {task_ref(task.id)} '{task.title}'", (Change("status", task.status, "done"),)
    )


@write_tool(
    "close_task",
    "Mark a task as done (a person must approve it first).",
    CloseTask,
    preview=_preview_close,
    destructive=True,
)
async def close_task(args: CloseTask, ctx: ToolContext) -> Outcome:
    async with ctx.db.transaction() as session:
        task = await _task_in(session, ctx, args.task_id)
        task.status = "done"
        task.updated_at = utcnow()
    return Outcome({"task": as_json(task)}, f"Closed {task_ref(task.id)}", task_link(ctx, task.id))


async def _preview_comment(args: CommentOnTask, ctx: ToolContext) -> Preview:
    task = await _load(ctx, args.task_id)
    return Preview(
        f"Comment on {task_ref(task.id)} '{task.title}'", (Change("comment", None, args.body),)
    )


@write_tool(
    "comment_on_task",
    "Add a comment to a task (a person must approve it first).",
    CommentOnTask,
    preview=_preview_comment,
    finds_earlier_write=True,
)
async def comment_on_task(args: CommentOnTask, ctx: ToolContext) -> Outcome:
    async with ctx.db.transaction() as session:
        if ctx.idempotency_key and await session.scalar(
            select(TaskComment.id).where(TaskComment.idempotency_key == ctx.idempotency_key)
        ):
            return Outcome({"commented": True}, f"Commented on {task_ref(args.task_id)}")
        task = await _task_in(session, ctx, args.task_id)
        session.add(
            TaskComment(
                task_id=task.id,
                author=ctx.requester,
                body=args.body,
                idempotency_key=ctx.idempotency_key,
            )
        )
    return Outcome(
        {"commented": True, "task_id": args.task_id},
        f"Commented on {task_ref(args.task_id)}",
        task_link(ctx, args.task_id),
    )


TOOLS = [list_tasks, get_task, create_task, update_task, close_task, comment_on_task]
