"""The `tasks` pack's writes: each is a card first; creating and commenting find an earlier
run of the same approved call by its idempotency key, so a retry writes once."""

from __future__ import annotations

from datetime import date
from typing import Any

from sqlalchemy import select

from bot.db.models import Task, TaskComment, utcnow
from bot.tools.packs.tasks.arguments import CloseTask, CommentOnTask, CreateTask, UpdateTask
from bot.tools.packs.tasks.board import (
    as_json,
    due,
    due_words,
    load_readable,
    task_in,
    task_link,
    task_ref,
)
from bot.tools.registry import Change, Outcome, Preview, ToolContext, write_tool


async def _preview_create(args: CreateTask, ctx: ToolContext) -> Preview:
    who = await ctx.user_label(args.assignee)
    assigned = f" assigned to {who}" if args.assignee else ""
    return Preview(
        f"Create task '{args.title}'{assigned}{due_words(due(args.due_date))}",
        (
            Change("title", None, args.title),
            Change("description", None, args.description or None),
            Change("assignee", None, who if args.assignee else None),
            Change("due date", None, due(args.due_date)),
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
            due_date=due(args.due_date),
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
    task = await load_readable(ctx, args.task_id)
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
        task = await task_in(session, ctx, args.task_id)
        for name in _FIELDS:
            value = getattr(args, name)
            if value is not None:
                setattr(task, name, due(value) if name == "due_date" else value)
        task.updated_at = utcnow()
    return Outcome({"task": as_json(task)}, f"Updated {task_ref(task.id)}", task_link(ctx, task.id))


async def _preview_close(args: CloseTask, ctx: ToolContext) -> Preview:
    task = await load_readable(ctx, args.task_id)
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
        task = await task_in(session, ctx, args.task_id)
        task.status = "done"
        task.updated_at = utcnow()
    return Outcome({"task": as_json(task)}, f"Closed {task_ref(task.id)}", task_link(ctx, task.id))


async def _preview_comment(args: CommentOnTask, ctx: ToolContext) -> Preview:
    task = await load_readable(ctx, args.task_id)
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
        task = await task_in(session, ctx, args.task_id)
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
