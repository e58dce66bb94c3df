"""What happens to the tool calls of one model round, before anything is stored.

Unknown tools and arguments that are not JSON or do not fit the schema become an error result
for the model (never executed, never shown as a card), and so do arguments a tool's preview or
read finds wrong (`ToolArgumentsError`: a repository outside the allow-list, an unknown state).
Read tools run at once, unless the policy asks on them (a rule naming the read, or an
open-world read after untrusted input): such a read becomes a proposal like a write, whose
card shows every argument in full (`read_preview`); write tools get their preview and wait
for a person.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from bot.errors import plain_error
from bot.llm import ToolCall
from bot.metrics import TOOL_READS
from bot.tools.catalog import ToolRegistry
from bot.tools.context import said_by
from bot.tools.registry import (
    Change,
    Preview,
    Tool,
    ToolArgumentsError,
    ToolContext,
    read_label,
)
from bot.tools.shown import unshowable


@dataclass(frozen=True)
class Prepared:
    call: ToolCall
    tool: Tool[Any] | None
    result: dict[str, Any] | None  # immediate result; None: waiting for approval
    arguments: dict[str, Any] | None = None
    preview: Preview | None = None
    audience: str | None = None  # a read's result: who may read it (`bot.audience`)
    source: str | None = None  # a read's result: what was read (a card's provenance)

    @property
    def needs_approval(self) -> bool:
        return self.result is None

    def content(self) -> str | None:
        return None if self.result is None else stored_result(self.result)


MAX_STORED_RESULT = 24_000  # characters of one tool result kept in the conversation


def stored_result(result: dict[str, Any]) -> str:
    """A tool result as it is stored: at most `MAX_STORED_RESULT` characters of JSON. Every
    later prompt loads it again (the model is shown a part anyway, see `Memory`), so a tool
    that answers megabytes must not fill the database and each turn's reading with them."""
    text = json.dumps(result, ensure_ascii=False)
    keep = MAX_STORED_RESULT - 300
    while len(text) > MAX_STORED_RESULT:
        status = result.get("status")
        text = json.dumps(
            {
                "status": status if isinstance(status, str) else "ok",
                "truncated": f"the result had {len(json.dumps(result, ensure_ascii=False))} "
                f"characters; only its start was kept",
                "start": json.dumps(result, ensure_ascii=False)[:keep],
            },
            ensure_ascii=False,
        )
        keep = keep * 3 // 4
    return text


# (task id, title, pending|in_progress|complete|error, details): how the reply shows a step
OnTask = Callable[[str, str, str, str | None], None]
# A read's tool and arguments -> the result that refuses it (a policy's deny), "ask" (it
# becomes a proposal: a person approves it first), or None: run it
ASK: Literal["ask"] = "ask"
Screen = Callable[[Tool[Any], dict[str, Any]], Awaitable[dict[str, Any] | Literal["ask"] | None]]


def read_preview(tool: Tool[Any], arguments: dict[str, Any]) -> Preview:
    """A read's card: what it asks of whom, and every argument in full (a URL carrying data
    is visible); it changes nothing, so there are no old values to check before it runs."""
    mcp = tool.input_schema is not None
    where = f" on the MCP server {tool.pack}" if mcp else ""
    shown = tool.description.split(":")[0] if mcp else tool.running_label or tool.name
    return Preview(
        f"{shown}: a read{where}. It changes nothing, but every argument below is sent as "
        "shown, and its result goes to the assistant.",
        tuple(
            Change(name, None, v if isinstance(v, str) else json.dumps(v, ensure_ascii=False))
            for name, v in arguments.items()
        ),
    )


def _invalid(exc: ToolArgumentsError) -> dict[str, Any]:
    return {
        "status": "invalid_arguments",
        "error": str(exc),
        "instruction": "Nothing was done. Fix the arguments and call again.",
    }


def _plain(arguments: Any) -> dict[str, Any]:
    dumped = arguments.model_dump(mode="json")
    return dumped if isinstance(dumped, dict) else {}


def _outcome(result: dict[str, Any]) -> str:
    status = result.get("status")
    return str(status) if status in ("error", "invalid_arguments") else "ok"


def _detail(result: dict[str, Any]) -> tuple[str, str]:
    """The task's final state and a short detail for the reader."""
    if result.get("status") in ("error", "invalid_arguments"):
        return "error", str(result.get("error", "failed"))[:200]
    return "complete", "done"


async def prepare_calls(
    calls: list[ToolCall],
    registry: ToolRegistry,
    context: Callable[[], ToolContext],
    on_task: OnTask,
    timeout: float,
    max_calls: int = 8,
    screen: Screen | None = None,
) -> list[Prepared]:
    """One `Prepared` per call, in call order (each call is answered, run or not); calls past
    `max_calls` in one round are refused without running."""
    prepared: list[Prepared] = []
    for call in calls[:max_calls]:  # every read the round will run shows as a step at once
        queued = registry.for_model(call.name)
        if queued is not None and not queued.requires_approval:
            on_task(call.id, queued.running_label or f"Running {queued.name}", "pending", None)
    for position, call in enumerate(calls):
        tool = registry.for_model(call.name)
        if position >= max_calls:
            prepared.append(
                Prepared(
                    call,
                    tool,
                    {
                        "status": "error",
                        "error": f"too many tool calls in one round (at most {max_calls}); "
                        "this one was not run. Make fewer calls at a time.",
                    },
                )
            )
            continue
        if tool is None:
            prepared.append(
                Prepared(
                    call, None, {"status": "error", "error": f"there is no tool {call.name!r}"}
                )
            )
            continue
        try:
            # Off the event loop: a tool server's schema may hold slow patterns.
            arguments = await asyncio.to_thread(tool.parse, call.arguments)
        except ToolArgumentsError as exc:
            if not tool.requires_approval:  # its pending step ends here
                label = tool.running_label or f"Running {tool.name}"
                on_task(call.id, label, "error", "the model's arguments did not fit")
            prepared.append(Prepared(call, tool, _invalid(exc)))
            continue
        if not tool.requires_approval:
            label = tool.running_label or f"Running {tool.name}"
            refused = None if screen is None else await screen(tool, _plain(arguments))
            if refused == ASK:
                prepared.append(_asked(call, tool, _plain(arguments), on_task))
                continue
            if isinstance(refused, dict):
                on_task(call.id, label, "error", "forbidden by policy")
                prepared.append(Prepared(call, tool, refused))
                continue
            on_task(call.id, label, "in_progress", None)
            audience = source = None
            try:
                outcome = await asyncio.wait_for(tool.run(arguments, context()), timeout)
                result: dict[str, Any] = outcome.result
                audience, source = outcome.audience, read_label(tool, arguments, outcome.source)
            except ToolArgumentsError as exc:  # well-formed, but not a name the service knows
                result = _invalid(exc)
            except Exception as exc:  # the model is told, the turn goes on
                result = {"status": "error", "error": plain_error(exc)}
                if (said := said_by(exc)) is not None:  # a server's words: untrusted input
                    source = read_label(tool, arguments, said)
            on_task(call.id, label, *_detail(result))
            TOOL_READS.labels(pack=tool.pack or "-", outcome=_outcome(result)).inc()
            prepared.append(Prepared(call, tool, result, audience=audience, source=source))
            continue
        assert tool.preview is not None
        try:
            preview = await asyncio.wait_for(tool.prepare(arguments, context()), timeout)
        except ToolArgumentsError as exc:  # e.g. a repository outside GITHUB_REPOS: no card
            prepared.append(Prepared(call, tool, _invalid(exc)))
            continue
        except Exception as exc:  # e.g. the task to update does not exist
            prepared.append(
                Prepared(
                    call,
                    tool,
                    {
                        "status": "error",
                        "error": f"could not prepare this action: {plain_error(exc)}",
                    },
                )
            )
            continue
        prepared.append(
            Prepared(call, tool, None, arguments=arguments.model_dump(mode="json"), preview=preview)
        )
    return prepared


def _asked(call: ToolCall, tool: Tool[Any], arguments: dict[str, Any], on_task: OnTask) -> Prepared:
    """A read the policy asks on: a proposal with its card, or an error if its arguments
    cannot all be shown on one."""
    label = tool.running_label or f"Running {tool.name}"
    problem = unshowable(arguments)
    if problem:
        on_task(call.id, label, "error", "the arguments cannot be shown on a card")
        return Prepared(call, tool, _invalid(ToolArgumentsError(problem)))
    on_task(call.id, label, "complete", "waiting for approval")
    return Prepared(call, tool, None, arguments=arguments, preview=read_preview(tool, arguments))
