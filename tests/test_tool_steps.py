"""Each read tool of a round is a step: pending as soon as the round starts, then in progress,
then complete or error (invalid arguments included); writes are not steps (they get cards)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bot.conversation.tool_calls import prepare_calls
from bot.llm import ToolCall
from bot.tools.catalog import ToolRegistry
from bot.tools.registry import ToolContext


async def test_read_calls_go_pending_then_run_in_turn(tmp_path: Any) -> None:
    registry = ToolRegistry.from_packs(["bot.tools.packs.tasks"])
    steps: list[tuple[str, str]] = []

    def on_task(task_id: str, title: str, state: str, details: str | None) -> None:
        steps.append((task_id, state))

    calls = [
        ToolCall("a", "list_tasks", "{}"),
        ToolCall("b", "get_task", '{"task_id": "not a number"}'),
        ToolCall("c", "create_task", '{"title": "x"}'),
    ]
    context: Callable[[], ToolContext] = lambda: None  # type: ignore[assignment,return-value]  # noqa: E731
    await prepare_calls(calls, registry, context, on_task, timeout=1.0)
    assert steps[:2] == [("a", "pending"), ("b", "pending")]
    assert [s for t, s in steps if t == "a"][1] == "in_progress"
    assert [s for t, s in steps if t == "b"][-1] == "error"
    assert all(t != "c" for t, _ in steps), "a write is a card, not a step"
