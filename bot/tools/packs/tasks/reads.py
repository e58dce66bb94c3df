"""The `tasks` pack's reads: only the tasks the person who asked may read."""

from __future__ import annotations

from sqlalchemy import or_, select

from bot.audience import narrowest_of
from bot.db.models import Task, TaskComment
from bot.tools.packs.task_audience import audiences as _audiences
from bot.tools.packs.task_audience import readable as _readable
from bot.tools.packs.tasks.arguments import GetTask, ListTasks
from bot.tools.packs.tasks.board import as_json, load_readable, task_link, task_ref
from bot.tools.registry import Outcome, ToolContext, read_tool


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
    task = await load_readable(ctx, args.task_id)
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
