"""`tasks`: a team task board kept in the bot's own database.

Writes take the proposal's idempotency key, so running the same approved call twice (a retry
after a crash, say) creates one task, not two.
"""

from __future__ import annotations

from bot.tools.packs.tasks.arguments import CreateTask, UpdateTask
from bot.tools.packs.tasks.reads import get_task, list_tasks
from bot.tools.packs.tasks.writes import close_task, comment_on_task, create_task, update_task

PACK = "tasks"

TOOLS = [list_tasks, get_task, create_task, update_task, close_task, comment_on_task]

__all__ = ["PACK", "TOOLS", "CreateTask", "UpdateTask"]
