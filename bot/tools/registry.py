"""A tool is declared once, typed: name, description, a pydantic model for its arguments (whose
strict JSON schema goes to the model), and for write tools a plain-language preview built from
the target's current state. A tool with a preview requires approval; one without is read-only
and runs at once.

Tools are gathered in a `ToolRegistry` (`bot.tools.catalog`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from bot.provenance import Source
from bot.tools import schema_arguments
from bot.tools.context import OutcomeUnknown as OutcomeUnknown
from bot.tools.context import ToolArgumentsError as ToolArgumentsError
from bot.tools.context import ToolContext as ToolContext
from bot.tools.context import ToolError as ToolError
from bot.tools.schema_arguments import FieldSpec
from bot.tools.shown import unshowable

A = TypeVar("A", bound=BaseModel)


@dataclass(frozen=True)
class Change:
    """One previewed field: what it is now and what it will be."""

    field: str
    old: str | None
    new: str | None
    # What is compared before running when `old` is only a label (an id, a login, a sorted
    # list of ids): a renamed state is not a changed state. None: `old` itself is compared.
    old_value: str | None = None

    @property
    def compared(self) -> str | None:
        return self.old if self.old_value is None else self.old_value

    def as_json(self) -> dict[str, str | None]:
        shown = {"field": self.field, "old": self.old, "new": self.new}
        return shown if self.old_value is None else shown | {"old_value": self.old_value}


@dataclass(frozen=True)
class Preview:
    description: str  # "Create task 'Fix login bug' assigned to @dana, due Friday"
    changes: tuple[Change, ...] = ()
    # What the preview was made against that is not a field of it (an MCP tool's schema hash,
    # a pull request's head commit): if it moved before the run, the action is stale.
    pin: str | None = None
    pin_changed: str | None = None  # how to say it moved: "the head commit is now 1a2b3c4"
    # Every name the preview resolved (`ToolContext.resolve`), as what it resolved to: ids
    # with the names the card showed. Filled in by `Tool.prepare`, stored with the proposal's
    # revision; the run sends these ids and the executor compares their identity before it.
    resolved: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Outcome:
    result: dict[str, Any]  # what the model is told
    summary: str  # what the card shows, in plain words
    link: str | None = None
    # A read's result: who may read it (`bot.audience`: "C:<channel>" for a channel read, one
    # person "U:<user>"); None: anyone in the workspace (what a workspace-wide credential reads).
    audience: str | None = None
    # What was read, for the prompt's data marker, the policy and the card of a write proposed
    # after it: a `Source("tool", "GitHub issue acme/api#7", author=…, link=…)`, or (older
    # packs) words ("issue acme/api#7 by an outside contributor"); None: the tool's name and
    # arguments say it.
    source: str | Source | None = None


@dataclass(frozen=True)
class Tool(Generic[A]):
    name: str
    description: str
    arguments: type[A]
    run: Callable[[A, ToolContext], Awaitable[Outcome]]
    preview: Callable[[A, ToolContext], Awaitable[Preview]] | None = None
    destructive: bool = False
    expires_after: timedelta | None = None
    pack: str = ""
    running_label: str = ""  # shown in the live reply while a read tool runs
    # Set for tools described by a JSON schema (MCP); `arguments` is then `SchemaArguments`.
    input_schema: dict[str, Any] | None = None
    # How the destination reads mentions in what is sent (`bot.tools.shown_notes.Mentions`);
    # empty: the pack's default.
    mentions: str = ""
    # True when `run`, given the same idempotency key, finds the write an earlier attempt made
    # (or writing again changes nothing) instead of writing twice: a retry after an unknown
    # outcome then runs at once. False: such a retry needs its clicker to confirm that it may
    # write twice.
    finds_earlier_write: bool = False
    # True when the tool may reach anything outside the workspace's own services (an MCP
    # tool that does not say `openWorldHint: false`): after untrusted input its calls carry
    # data out, so the policy asks even on a read (`bot.policy.untrusted`).
    open_world: bool = False
    # True for an action the bot proposes on a person's behalf (a budget raise): it is never
    # offered to the model, a model's call naming it is refused as an unknown tool, and its
    # card has no Edit (its arguments come from the bot's own form).
    internal: bool = False

    @property
    def requires_approval(self) -> bool:
        return self.preview is not None

    async def prepare(self, arguments: A, ctx: ToolContext) -> Preview:
        """The preview, carrying every name it resolved through `ctx` (what the proposal
        stores and the run sends); the one way a card, an edit or the pre-run check previews."""
        if self.preview is None:
            raise ValueError(f"{self.name} is not a write tool")
        ctx._resolved.clear()
        made = await self.preview(arguments, ctx)
        return replace(made, resolved=ctx.resolutions)

    def schema(self) -> dict[str, Any]:
        if self.input_schema is not None:
            return {
                "type": "function",
                "function": {
                    "name": self.name,
                    "description": self.description[:1024],
                    "parameters": self.input_schema,
                },
            }
        # Imported here: the CLI's policy and audit commands read tools without the model's
        # SDK, whose import alone takes over a second.
        import openai

        return dict(
            openai.pydantic_function_tool(
                self.arguments, name=self.name, description=self.description
            )
        )

    def fields(self) -> list[FieldSpec]:
        """The arguments a person may edit on the card."""
        if self.input_schema is not None:
            return schema_arguments.fields(self.input_schema)
        return [
            FieldSpec(name, info.description, info.is_required())
            for name, info in self.arguments.model_fields.items()
        ]

    def _validate(self, data: dict[str, Any]) -> A:
        if self.input_schema is not None:
            found = schema_arguments.problems(self.input_schema, data)
            if found:
                raise ToolArgumentsError("; ".join(found))
        try:
            validated = self.arguments.model_validate(data)
        except ValidationError as exc:
            raise ToolArgumentsError(_problems(exc)) from None
        if self.preview is not None:  # a write: every character it sends must be showable
            problem = unshowable(validated.model_dump(mode="json"))
            if problem:
                raise ToolArgumentsError(problem)
        return validated

    def parse(self, raw: str | dict[str, Any]) -> A:
        try:
            data = json.loads(raw) if isinstance(raw, str) else raw
        except json.JSONDecodeError as exc:
            raise ToolArgumentsError(f"arguments are not valid JSON ({exc.msg})") from None
        if not isinstance(data, dict):
            raise ToolArgumentsError("arguments must be a JSON object")
        return self._validate(data)


def _problems(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors()
    )


def read_label(tool: Tool[Any], arguments: Any, declared: str | Source | None) -> str:
    """What a read read, in a line (a later card's provenance, a tool result's source): the
    tool's own words, else its name and arguments (a `Source` a tool gave is kept whole, as
    JSON: `bot.provenance.source_of` reads both)."""
    if isinstance(declared, Source):
        return declared.dumps()
    if declared:
        return f"{tool.name}: {declared}"[:300]
    shown = json.dumps(arguments.model_dump(mode="json"), ensure_ascii=False, sort_keys=True)
    return f"{tool.name} {shown}"[:300]


def arguments_hash(arguments: dict[str, Any]) -> str:
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def read_tool(
    name: str, description: str, arguments: type[A], *, label: str = ""
) -> Callable[[Callable[[A, ToolContext], Awaitable[Outcome]]], Tool[A]]:
    def wrap(run: Callable[[A, ToolContext], Awaitable[Outcome]]) -> Tool[A]:
        return Tool(name, description, arguments, run, running_label=label)

    return wrap


def write_tool(
    name: str,
    description: str,
    arguments: type[A],
    *,
    preview: Callable[[A, ToolContext], Awaitable[Preview]],
    destructive: bool = False,
    expires_after: timedelta | None = None,
    mentions: str = "",
    finds_earlier_write: bool = False,
) -> Callable[[Callable[[A, ToolContext], Awaitable[Outcome]]], Tool[A]]:
    def wrap(run: Callable[[A, ToolContext], Awaitable[Outcome]]) -> Tool[A]:
        return Tool(
            name,
            description,
            arguments,
            run,
            preview=preview,
            destructive=destructive,
            expires_after=expires_after,
            mentions=mentions,
            finds_earlier_write=finds_earlier_write,
        )

    return wrap
