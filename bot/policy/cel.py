"""CEL conditions (cel-python, `celpy`): compiled once per policy version, evaluated under a
time and size guard. A condition that runs too long is stopped (a trace function raises in
the evaluating thread), so a hostile or broken expression cannot hang the bot; the caller
treats any failure as "cannot be evaluated" and falls back to ask. `matches()` runs on RE2
(linear time, no backtracking), so a pattern cannot hang inside one C call either."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from functools import lru_cache
from types import FrameType
from typing import TYPE_CHECKING, Any

import celpy
from celpy import celtypes
from celpy.adapter import json_to_cel

if TYPE_CHECKING:
    from bot.policy.model import PolicyFile

EVALUATION_SECONDS = 0.25  # per condition
MAX_CONTEXT = 200_000  # characters of facts (arguments) a condition may see

_ENV = celpy.Environment()


class ConditionError(Exception):
    """The condition could not be evaluated to true or false."""


@lru_cache(maxsize=512)
def _program(expression: str) -> Any:
    return _ENV.program(_ENV.compile(expression))


def compile_rules(policy: PolicyFile, lines: dict[tuple[str | int, ...], int]) -> None:
    """Compile every `when`; a syntax error is a `PolicyError` naming the condition's line."""
    from bot.policy.model import PolicyError

    for index, rule in enumerate(policy.rules):
        if rule.when is None:
            continue
        try:
            _program(rule.when)
        except Exception as exc:  # celpy raises CELParseError and friends
            line = lines.get(("rules", index, "when")) or lines.get(("rules", index))
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise PolicyError(
                line, f"rule {rule.name!r}: the condition does not parse: {first}"
            ) from None


class _Deadline(BaseException):
    """Raised inside a condition that ran past its time (not an Exception: nothing in the
    evaluator may swallow it)."""


def _guarded(work: Callable[[], Any], seconds: float) -> Any:
    """Run `work` in this thread, stopping it once `seconds` have passed."""
    deadline = time.monotonic() + seconds

    def tracer(frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
        if time.monotonic() > deadline:
            raise _Deadline
        return None  # calls are enough: no line events

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        return work()
    finally:
        sys.settrace(previous)


def evaluate(expression: str, facts: dict[str, Any], seconds: float = EVALUATION_SECONDS) -> bool:
    """Whether the condition holds for `facts`; `ConditionError` if it cannot be told."""
    if len(json.dumps(facts, default=str)) > MAX_CONTEXT:
        raise ConditionError(f"the arguments are longer than {MAX_CONTEXT} characters")
    try:
        program = _program(expression)
        activation = {name: json_to_cel(value) for name, value in facts.items()}
    except Exception as exc:
        raise ConditionError(f"cannot prepare the condition: {type(exc).__name__}") from None
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(_guarded(lambda: program.evaluate(activation), seconds))
        except _Deadline:
            outcome.append(ConditionError(f"the condition ran longer than {seconds:g}s"))
        except Exception as exc:
            outcome.append(ConditionError(f"{type(exc).__name__}: {str(exc)[:200]}"))

    # Its own thread: the trace function is per thread, and the caller's stays untouched.
    worker = threading.Thread(target=run, name="policy-condition", daemon=True)
    worker.start()
    worker.join(seconds + 1.0)
    if not outcome:
        raise ConditionError("the condition did not finish")
    result = outcome[0]
    if isinstance(result, ConditionError):
        raise result
    if isinstance(result, celtypes.BoolType | bool):
        return bool(result)
    if isinstance(result, Exception):  # celpy returns some errors as values
        raise ConditionError(f"{type(result).__name__}: {str(result)[:200]}")
    raise ConditionError(f"the condition gave {type(result).__name__}, not true or false")
