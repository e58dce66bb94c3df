"""The policy file's shape, validated with pydantic; `load_text` names the line of a mistake.

```yaml
version: 1
default: ask
rules:
  - name: low-priority-tasks
    tools: [create_task]
    when: 'args.priority == "low"'
    outcome: allow
```
"""

from __future__ import annotations

import hashlib
import re
from datetime import timedelta
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from bot.durations import parse_duration
from bot.spend.budget_model import Budget, check_timezone, unique_names

Outcome = Literal["allow", "deny", "ask"]
MAX_EXPRESSION = 2000  # characters of one `when`: a condition is a line, not a program


def _duration(value: Any) -> str:
    parse_duration(value)
    return str(value)


class Escalation(BaseModel):
    """A step of the ladder (`bot.approvals.escalation`): remind, add approvers, or decide."""

    model_config = ConfigDict(extra="forbid")

    after: str
    to: list[str] = Field(default_factory=list)
    outcome: Outcome | None = None

    _after = field_validator("after", mode="before")(_duration)


# The name of the rules `APPROVAL_POLICIES` is mapped into (`bot.policy.source`). That setting
# names who approves writes: its rules never decide a read, even where they name its pack.
LEGACY_RULE = "APPROVAL_POLICIES["


class Rule(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=100)
    tools: list[str] = Field(default_factory=lambda: ["*"])  # tool or pack names, globs
    channels: list[str] = Field(default_factory=list)  # empty: every channel
    requesters: list[str] = Field(default_factory=list)
    groups: list[str] = Field(default_factory=list)  # the requester is in one of them
    when: str | None = Field(None, max_length=MAX_EXPRESSION)
    outcome: Outcome
    reason: str | None = Field(None, max_length=500)
    shadow: bool = False  # evaluated and recorded, never enforced
    approvers: list[str] = Field(default_factory=list)
    approvals_required: int = Field(1, ge=1, le=10)
    four_eyes: bool = False
    timeout: str | None = None
    route: str = "thread"
    grants: list[Literal["once", "thread", "channel", "me"]] = Field(default_factory=list)
    grant_expiry: str | None = None
    escalate: list[Escalation] = Field(default_factory=list)
    # After untrusted input (`bot.policy.untrusted`): unset, an allow or a grant does not
    # cover a call that followed outside input; set, it applies after any untrusted input.
    after_untrusted: Outcome | None = None

    _durations = field_validator("timeout", "grant_expiry", mode="before")(
        lambda v: None if v is None else _duration(v)
    )

    @field_validator("route")
    @classmethod
    def _route(cls, v: str) -> str:
        if v not in ("thread", "dm") and not re.fullmatch(r"channel:[CGD][A-Z0-9]+", v):
            raise ValueError("must be thread, dm or channel:C123")
        return v

    @field_validator("tools")
    @classmethod
    def _some_tools(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("name at least one tool, pack or glob (* for every tool)")
        return v

    @property
    def expires_after(self) -> timedelta | None:
        return None if self.timeout is None else parse_duration(self.timeout)


class PolicyFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int = Field(ge=1)
    default: Outcome = "ask"
    rules: list[Rule] = Field(default_factory=list)
    # Spend (`bot.spend`): every budget whose scope matches a turn applies to it; calendar
    # windows are read in `timezone`.
    budgets: list[Budget] = Field(default_factory=list)
    timezone: str = "UTC"

    _budgets = field_validator("budgets")(unique_names)
    _tz = field_validator("timezone")(check_timezone)

    @field_validator("rules")
    @classmethod
    def _unique_names(cls, v: list[Rule]) -> list[Rule]:
        seen: set[str] = set()
        for rule in v:
            if rule.name in seen:
                raise ValueError(f"two rules are named {rule.name!r}")
            seen.add(rule.name)
        return v


class PolicyError(ValueError):
    """An invalid policy file: where (line) and why."""

    def __init__(self, line: int | None, reason: str) -> None:
        self.line = line
        self.reason = reason
        super().__init__(f"line {line}: {reason}" if line else reason)


class _LineLoader(yaml.SafeLoader):
    """Remembers the line of every mapping and sequence item, by their path."""


def _lines(text: str) -> dict[tuple[str | int, ...], int]:
    """(path in the document) -> 1-based line, for every node."""
    found: dict[tuple[str | int, ...], int] = {}

    def walk(node: yaml.Node, path: tuple[str | int, ...]) -> None:
        found[path] = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                found[(*path, str(key.value))] = key.start_mark.line + 1
                walk(value, (*path, str(key.value)))
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                walk(item, (*path, index))

    root = yaml.compose(text, Loader=_LineLoader)
    if root is not None:
        walk(root, ())
    return found


def version_of(text: str, declared: int) -> str:
    """The version in force: the file's `version` and its content's hash (`1@3f2a9c1b0d4e`)."""
    return f"{declared}@{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def load_text(text: str) -> PolicyFile:
    """The validated policy, or `PolicyError` with the line and reason of the first problem."""
    try:
        raw = yaml.safe_load(text)
        lines = _lines(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise PolicyError(mark.line + 1 if mark else None, f"not valid YAML: {problem}") from None
    if not isinstance(raw, dict):
        raise PolicyError(1, "the file must be a mapping with version, default and rules")
    try:
        policy = PolicyFile.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        path = tuple(first["loc"])
        line = None
        while path and line is None:
            line = lines.get(tuple(str(p) if isinstance(p, str) else p for p in path))
            path = path[:-1]
        where = ".".join(str(p) for p in first["loc"])
        raise PolicyError(line or 1, f"{where}: {first['msg']}") from None
    from bot.policy.cel import compile_rules  # a condition that does not parse is invalid

    compile_rules(policy, lines)
    return policy
