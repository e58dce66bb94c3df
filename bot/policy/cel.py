"""CEL conditions (cel-python, `celpy`): compiled once per policy version, evaluated under a
time and size guard. A condition that runs too long is stopped (its watchdog raises a deadline
in the evaluating thread), so a hostile or broken expression cannot hang the bot; the caller
treats any failure as "cannot be evaluated" and falls back to ask. `matches()` runs on RE2
(linear time, no backtracking), so a pattern cannot hang inside one C call either."""

from __future__ import annotations

import ctypes
import json
import threading
import time
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import celpy
from celpy import celtypes
from celpy.adapter import json_to_cel

if TYPE_CHECKING:
    from bot.policy.model import PolicyFile

EVALUATION_SECONDS = 0.25  # per condition
MAX_CONTEXT = 200_000  # characters of facts (arguments) a condition may see

# Conditions are transpiled to Python once (celpy's CompiledRunner): 2-3 times faster than
# walking the parse tree at every evaluation (bench/policy.py), the same outcomes (literals
# are emitted with repr, names are the lexer's). celpy keeps one parser per process, built
# with the tree class of the first Environment: this must stay the only one.
_ENV = celpy.Environment(runner_class=celpy.CompiledRunner)


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


Outcome = bool | ConditionError


class _Run:
    """One worker's progress through a decision's conditions, shared with its watchdog."""

    def __init__(self, count: int) -> None:
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.current = -1  # the condition being evaluated
        self.started = 0.0  # when it started (monotonic)
        self.evaluating = False  # inside celpy: where a deadline may be raised
        self.stopped = -1  # the condition a deadline was raised for
        self.results: list[Outcome] = [ConditionError("the condition did not finish")] * count


def _interrupt(thread_id: int) -> None:
    """Raise `_Deadline` in that thread at its next bytecode (CPython's asynchronous
    exception: no cost while the condition runs, unlike a trace function on every call)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(_Deadline)
    )


def _outcome(result: Any) -> Outcome:
    if isinstance(result, celtypes.BoolType | bool):
        return bool(result)
    if isinstance(result, Exception):  # celpy returns some errors as values
        return ConditionError(f"{type(result).__name__}: {str(result)[:200]}")
    return ConditionError(f"the condition gave {type(result).__name__}, not true or false")


def _work(
    run: _Run, expressions: Sequence[str], activation: dict[str, Any], seconds: float
) -> None:
    """Evaluate each condition in turn; a deadline raised into one ends only that one."""
    try:
        for index, expression in enumerate(expressions):
            try:
                program = _program(expression)
                with run.lock:
                    run.current, run.started, run.evaluating = index, time.monotonic(), True
                result = program.evaluate(activation)
                with run.lock:
                    run.evaluating = False
                run.results[index] = _outcome(result)
            except _Deadline:
                with run.lock:
                    run.evaluating = False
                run.results[index] = ConditionError(f"the condition ran longer than {seconds:g}s")
            except Exception as exc:
                with run.lock:
                    run.evaluating = False
                run.results[index] = ConditionError(f"{type(exc).__name__}: {str(exc)[:200]}")
    except _Deadline:  # landed outside a condition: what is left stays "did not finish"
        pass
    finally:
        run.done.set()


def evaluate_all(
    expressions: Sequence[str], facts: dict[str, Any], seconds: float = EVALUATION_SECONDS
) -> list[Outcome]:
    """Whether each condition holds for `facts`, or the `ConditionError` saying why it cannot
    be told; each condition may run for `seconds`.

    One worker thread evaluates all of a decision's conditions, with the facts converted once;
    this thread watches it and raises a deadline into it when a condition runs too long. If a
    condition is stuck in one C call past its time and a second more, the worker is left
    behind and what it has not finished counts as not evaluated."""
    if not expressions:
        return []
    if len(json.dumps(facts, default=str)) > MAX_CONTEXT:
        too_long = ConditionError(f"the arguments are longer than {MAX_CONTEXT} characters")
        return [too_long] * len(expressions)
    try:
        activation = {name: json_to_cel(value) for name, value in facts.items()}
    except Exception as exc:
        unprepared = ConditionError(f"cannot prepare the condition: {type(exc).__name__}")
        return [unprepared] * len(expressions)
    run = _Run(len(expressions))
    # Its own thread: the deadline is raised into it, never into the caller.
    worker = threading.Thread(
        target=_work, args=(run, expressions, activation, seconds), daemon=True
    )
    worker.name = "policy-conditions"
    worker.start()
    poll = min(0.05, seconds / 5)
    while not run.done.wait(poll):
        with run.lock:
            late = time.monotonic() - run.started if run.evaluating else 0.0
            if late > seconds and run.stopped != run.current and worker.ident is not None:
                run.stopped = run.current
                _interrupt(worker.ident)
        if late > seconds + 1.0:  # stuck where no deadline can reach it
            break
    return list(run.results)


def evaluate(expression: str, facts: dict[str, Any], seconds: float = EVALUATION_SECONDS) -> bool:
    """Whether the condition holds for `facts`; `ConditionError` if it cannot be told."""
    (result,) = evaluate_all([expression], facts, seconds)
    if isinstance(result, ConditionError):
        raise result
    return result
