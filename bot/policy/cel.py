"""CEL conditions (cel-python, `celpy`): compiled once per policy version, evaluated under a
time and size guard, fail closed (the caller treats any failure as "cannot be evaluated" and
falls back to ask).

Two ways, picked per decision by `quick`. Conditions without a comprehension (`all`, `exists`,
`exists_one`, `map`, `filter`) over small facts run in the caller's thread: CEL has no other
loop, so their time is bounded by their length times the facts' (`INLINE_WORK`, well under a
millisecond in practice), and no thread is started or woken (bench/policy.py: the thread hops
were most of what a policy added to a proposal on a loaded machine). Anything else runs in a
worker thread that this thread watches: a condition that runs too long is stopped (a deadline
raised in the worker), so a hostile or broken expression cannot hang the bot. `matches()` runs
on RE2 (linear time, no backtracking), so a pattern cannot hang inside one C call either.

celpy's own `evaluate` runs the transpiled code in its module's namespace, shared by every
thread (two decisions in two threads could read each other's facts or result); `_evaluate`
gives each evaluation a namespace of its own.

Why celpy and not the Rust-backed `common-expression-language` (0.10, ~10x faster a
condition): that binding holds the GIL for a whole evaluation and has no iteration or cost
limit, so nothing can stop a runaway comprehension (one over 3,000 items ran 4.9 s with every
other thread stopped); it also compares int with double (`args.n > 2.5`), where celpy and
the policy tests give an error (fail closed), and has no `lowerAscii()`."""

from __future__ import annotations

import ctypes
import json
import threading
import time
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.policy.model import PolicyFile

EVALUATION_SECONDS = 0.25  # per condition
MAX_CONTEXT = 200_000  # characters of facts (arguments) a condition may see
# Conditions run in the caller's thread while their characters times the facts' stay under
# this (and none loops): about 20 ms for the slowest celpy operation over such facts (`in` on
# a list of maps), ~0.05 ms for a typical comparison over a proposal's arguments.
INLINE_WORK = 500_000
_LOOPS = "celpy.evaluation.macro_"  # what a comprehension transpiles to

# Conditions are transpiled to Python once (celpy's CompiledRunner): 2-3 times faster than
# walking the parse tree at every evaluation (bench/policy.py), the same outcomes (literals
# are emitted with repr, names are the lexer's). celpy keeps one parser per process, built
# with the tree class of the first Environment: this must stay the only one. It is made (and
# celpy imported, a tenth of a second and more) when a policy first has a condition, not at
# every start.
_ENVIRONMENT: list[Any] = []
_MAKING = threading.Lock()


def _env() -> Any:
    if not _ENVIRONMENT:
        with _MAKING:
            if not _ENVIRONMENT:
                import celpy

                _ENVIRONMENT.append(celpy.Environment(runner_class=celpy.CompiledRunner))
    return _ENVIRONMENT[0]


class ConditionError(Exception):
    """The condition could not be evaluated to true or false."""


@lru_cache(maxsize=512)
def _program(expression: str) -> Any:
    env = _env()
    return env.program(env.compile(expression))


@lru_cache(maxsize=512)
def _loops(expression: str) -> bool:
    """Whether the condition has a comprehension: the only CEL construct whose time grows
    faster than its length times the facts' (nested ones multiply). One that does not
    compile counts as looping: the worker reports its error."""
    try:
        return _LOOPS in _program(expression).tp.source_text
    except Exception:
        return True


def _namespace(activation: dict[str, Any]) -> dict[str, Any]:
    """What celpy's transpiled code runs in (a copy of its `evaluation` module's namespace),
    with the facts loaded once for all of a decision's conditions. celpy's own `evaluate`
    writes each condition's `ex_N` functions, `base_activation` and `CEL` into the module's
    namespace itself: shared by every thread, where two decisions mix facts and results."""
    from celpy import evaluation

    scope = dict(evaluation.result.__globals__)
    base = _program("true").tp.base_activation.clone()
    base.identifiers.load_values(activation)
    scope["base_activation"] = base
    return scope


def _evaluate(expression: str, scope: dict[str, Any]) -> Any:
    """`Transpiler.evaluate` in `scope`: the condition's value, or the error celpy made."""
    exec(_program(expression).tp.executable_code, scope)  # noqa: S102 (celpy compiled it)
    return scope["CEL"]


def _size(facts: dict[str, Any]) -> int:
    return len(json.dumps(facts, default=str))


def quick(expressions: Sequence[str], facts: dict[str, Any]) -> bool:
    """Whether `evaluate_all` runs these conditions in the caller's thread (no comprehension,
    small facts): fast enough for an event loop, with no worker to wait for."""
    return _quick(expressions, _size(facts))


def _quick(expressions: Sequence[str], size: int) -> bool:
    if any(_loops(e) for e in expressions):
        return False
    return sum(len(e) for e in expressions) * size <= INLINE_WORK


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


def _failed(exc: Exception) -> ConditionError:
    return ConditionError(f"{type(exc).__name__}: {str(exc)[:200]}")


def _outcome(result: Any) -> Outcome:
    from celpy import celtypes

    if isinstance(result, celtypes.BoolType | bool):
        return bool(result)
    if isinstance(result, Exception):  # celpy returns some errors as values
        return _failed(result)
    return ConditionError(f"the condition gave {type(result).__name__}, not true or false")


def _here(expressions: Sequence[str], scope: dict[str, Any]) -> list[Outcome]:
    results: list[Outcome] = []
    for expression in expressions:
        try:
            results.append(_outcome(_evaluate(expression, scope)))
        except Exception as exc:
            results.append(_failed(exc))
    return results


def _work(run: _Run, expressions: Sequence[str], scope: dict[str, Any], seconds: float) -> None:
    """Evaluate each condition in turn; a deadline raised into one ends only that one."""
    try:
        for index, expression in enumerate(expressions):
            try:
                _program(expression)  # compiled before its time starts
                with run.lock:
                    run.current, run.started, run.evaluating = index, time.monotonic(), True
                result = _evaluate(expression, scope)
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
                run.results[index] = _failed(exc)
    except _Deadline:  # landed outside a condition: what is left stays "did not finish"
        pass
    finally:
        run.done.set()


def evaluate_all(
    expressions: Sequence[str], facts: dict[str, Any], seconds: float = EVALUATION_SECONDS
) -> list[Outcome]:
    """Whether each condition holds for `facts`, or the `ConditionError` saying why it cannot
    be told; each condition may run for `seconds`.

    `quick` ones run here. Otherwise one worker thread evaluates all of a decision's
    conditions, with the facts converted once; this thread watches it and raises a deadline
    into it when a condition runs too long. If a condition is stuck in one C call past its
    time and a second more, the worker is left behind and what it has not finished counts as
    not evaluated."""
    if not expressions:
        return []
    size = _size(facts)
    if size > MAX_CONTEXT:
        too_long = ConditionError(f"the arguments are longer than {MAX_CONTEXT} characters")
        return [too_long] * len(expressions)
    from celpy.adapter import json_to_cel

    try:
        scope = _namespace({name: json_to_cel(value) for name, value in facts.items()})
    except Exception as exc:
        unprepared = ConditionError(f"cannot prepare the condition: {type(exc).__name__}")
        return [unprepared] * len(expressions)
    if _quick(expressions, size):
        return _here(expressions, scope)
    run = _Run(len(expressions))
    # Its own thread: the deadline is raised into it, never into the caller.
    worker = threading.Thread(target=_work, args=(run, expressions, scope, seconds), daemon=True)
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
