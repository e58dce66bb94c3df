"""Every write an outside service received, read from the services themselves (never from what
the bot says it did): GitHub's and Linear's recorded write requests, the MCP notebook's log,
Slack posts that carry the Slack pack's write marker, scheduled messages and topics, and the
task board's rows, whose changes are found by comparing each task with how it was at `mark`
(an update changes a row in place, so counting rows would miss it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import select

from bench.hostile_judge import strings_in
from bot.db.models import Task, TaskComment
from bot.db.session import Database
from tests.fakes.github import FakeGitHub
from tests.fakes.linear import FakeLinear
from tests.fakes.slack import FakeSlack
from tests.mcp_helpers import calls

SLACK_WRITE = "countersign_action"  # the metadata event the Slack pack's writes carry
TASK_FIELDS = ("title", "description", "priority", "status", "assignee", "due_date")


@dataclass(frozen=True)
class Write:
    """One write an outside service received: where, and the text the model chose for it."""

    service: str  # github | linear | mcp | slack | tasks
    target: str
    texts: tuple[str, ...]
    raw: Any = None


def _github(github: FakeGitHub) -> list[Write]:
    found = []
    for seen in github.writes():
        body = seen.body if isinstance(seen.body, dict) else {}
        texts = tuple(str(body[k]) for k in ("title", "body", "commit_title") if k in body)
        labels = tuple(str(x) for x in body.get("labels", []) if isinstance(x, str))
        found.append(Write("github", f"{seen.method} {seen.path}", texts + labels, body))
    return found


def _linear(linear: FakeLinear) -> list[Write]:
    found = []
    for mutation in linear.mutations():
        data = mutation.variables.get("input") or mutation.variables
        texts = tuple(str(data[k]) for k in ("title", "description", "body") if k in data)
        found.append(Write("linear", mutation.operation, texts, mutation.variables))
    return found


def _notes(log: Path) -> list[Write]:
    return [
        Write("mcp", c["tool"], tuple(strings_in(c["arguments"])), c["arguments"])
        for c in calls(log)
        if c["tool"] in ("add_note", "delete_note")
    ]


def _slack(slack: FakeSlack) -> list[Write]:
    found = []
    for c in slack.calls_to("chat.postMessage"):
        metadata = c.args.get("metadata")
        kind = metadata.get("event_type") if isinstance(metadata, dict) else str(metadata or "")
        if c.ok and SLACK_WRITE in str(kind):
            target = f"post {c.args.get('channel')}"
            found.append(Write("slack", target, (str(c.args.get("text", "")),), c.args))
    for method, key in (("chat.scheduleMessage", "text"), ("conversations.setTopic", "topic")):
        for c in slack.calls_to(method):
            found.append(Write("slack", method, (str(c.args.get(key, "")),), c.args))
    return found


def _stream(write: Write) -> str:
    """Which append-only record a write comes from: a service and the first word of its
    target (Slack's posts, scheduled messages and topics are separate lists, so a new post
    must not be counted against the topics', nor a topic against the posts')."""
    return f"{write.service}:{write.target.split(' ', 1)[0]}"


@dataclass
class Inventory:
    """What the services hold, and what is new since `mark`."""

    slack: FakeSlack
    github: FakeGitHub
    linear: FakeLinear
    notes_log: Path
    db: Database
    _counts: dict[str, int] = field(default_factory=dict)
    _tasks: dict[int, dict[str, Any]] = field(default_factory=dict)
    _comments: int = 0

    async def _board(self) -> tuple[dict[int, dict[str, Any]], list[TaskComment]]:
        async with self.db.transaction() as session:
            tasks = (await session.scalars(select(Task).order_by(Task.id))).all()
            comments = (await session.scalars(select(TaskComment).order_by(TaskComment.id))).all()
            rows = {t.id: {f: getattr(t, f) for f in TASK_FIELDS} for t in tasks}
            return rows, list(comments)

    def _appended(self) -> list[Write]:
        return [
            *_github(self.github),
            *_linear(self.linear),
            *_notes(self.notes_log),
            *_slack(self.slack),
        ]

    async def mark(self) -> None:
        """Remember what each service holds now: later writes are the new ones."""
        self._counts = {}
        for write in self._appended():
            self._counts[_stream(write)] = self._counts.get(_stream(write), 0) + 1
        self._tasks, comments = await self._board()
        self._comments = len(comments)

    async def new_writes(self) -> list[Write]:
        """The writes since `mark`: appended requests, new or changed tasks, new comments."""
        seen: dict[str, int] = {}
        fresh: list[Write] = []
        for write in self._appended():
            seen[_stream(write)] = seen.get(_stream(write), 0) + 1
            if seen[_stream(write)] > self._counts.get(_stream(write), 0):
                fresh.append(write)
        tasks, comments = await self._board()
        for task_id, now in tasks.items():
            before = self._tasks.get(task_id)
            if before == now:
                continue
            changed = {f: v for f, v in now.items() if before is None or before[f] != v}
            texts = tuple(str(v) for f, v in changed.items() if f in ("title", "description"))
            fresh.append(Write("tasks", f"task {task_id}", texts, changed))
        for comment in comments[self._comments :]:
            fresh.append(Write("tasks", f"comment on task {comment.task_id}", (comment.body,)))
        return fresh
