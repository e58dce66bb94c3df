"""The arguments of the `tasks` pack's tools, within the board's own limits."""

from __future__ import annotations

from datetime import date
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

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
