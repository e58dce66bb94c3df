"""How a decision evaluates its conditions (bench/policy.py found the old ways slow: a thread
and a trace function for every condition, about 1.5 ms each before celpy did any work, then
one thread a decision, whose hops were most of what a policy added on a loaded machine): the
facts converted once; quick conditions in the caller's thread, the others in one worker
thread a decision, with a watchdog that stops only the condition that runs too long."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from fnmatch import fnmatchcase
from typing import Any

import pytest
import yaml

from bot.policy.cel import ConditionError, evaluate_all, quick
from bot.policy.engine import Facts, decide, names_tool
from bot.policy.gate import decide_off_loop
from bot.policy.model import Rule, load_text

TEN = "[1,2,3,4,5,6,7,8,9,10]"
RUNAWAY = f"{TEN}.all(a, {TEN}.all(b, {TEN}.all(c, {TEN}.all(d, {TEN}.all(e, a + e > 0)))))"


def _counted_threads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    started: list[str] = []
    real = threading.Thread

    class Counted(real):  # type: ignore[misc, valid-type]
        def start(self) -> None:
            started.append(self.name)
            super().start()

    monkeypatch.setattr(threading, "Thread", Counted)
    return started


def _forty(when: str) -> Any:
    rules: list[dict[str, Any]] = [
        {"name": f"r{i}", "tools": ["create_task"], "when": when.format(i=i)}
        | {"outcome": ("allow", "deny")[i % 2]}
        for i in range(40)
    ]
    rules.append({"name": "tasks", "tools": ["create_task"], "outcome": "ask"})
    return load_text(yaml.safe_dump({"version": 1, "rules": rules}))


def test_quick_conditions_run_in_the_callers_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    # Comparisons over a proposal's arguments: no thread to start or wake (bench/policy.py:
    # the hops were most of what a policy added to a proposal on a loaded machine).
    started = _counted_threads(monkeypatch)
    facts = Facts("create_task", "tasks", {"priority": "normal"}, "C1", "UALICE")
    decision = decide(_forty('args.priority == "p{i}"'), "1@x", facts)
    assert (decision.outcome, decision.rule) == ("ask", "tasks")
    assert started == []
    assert sys.gettrace() is None  # and no trace function slowing every call


def test_conditions_that_loop_run_in_one_worker_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    started = _counted_threads(monkeypatch)
    facts = Facts("create_task", "tasks", {"tags": ["a"]}, "C1", "UALICE")
    decision = decide(_forty('args.tags.exists(t, t == "p{i}")'), "1@x", facts)
    assert (decision.outcome, decision.rule) == ("ask", "tasks")
    assert started == ["policy-conditions"]  # one worker for 40 conditions, not one each
    assert sys.gettrace() is None


def test_what_may_run_in_the_callers_thread() -> None:
    small = {"args": {"title": "OPS-1", "n": 3}}
    assert quick(['args.title.matches("^OPS-[0-9]+$") && args.n > 2'], small)
    assert not quick([RUNAWAY], small)  # comprehensions multiply: the worker and its deadline
    assert not quick(["[1].map(x, x) == [1]"], small)
    assert not quick(['args.s == "x"'], {"args": {"s": "x" * 100_000}})  # large facts
    assert not quick(["args.x == "], small)  # does not compile: the worker reports it


def test_conditions_in_two_threads_keep_their_own_facts() -> None:
    # celpy's own evaluate runs every condition in its module's namespace: two decisions in
    # two threads read each other's facts or result (this failed before `_namespace`).
    def run(value: int, wrong: list[object]) -> None:
        for _ in range(300):
            got = evaluate_all(
                [f"args.x == {value}", "[1, 2].exists(i, i == args.x % 3)"],
                {"args": {"x": value}},
            )
            if got != [True, value % 3 in (1, 2)]:
                wrong.append(got)

    wrong: list[object] = []
    threads = [threading.Thread(target=run, args=(v, wrong)) for v in (4, 5, 6)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns often, as on a busy machine
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert wrong == []


def test_a_runaway_condition_is_stopped_alone_and_the_others_are_told() -> None:
    started = time.monotonic()
    got = evaluate_all(
        ["args.x == 1", RUNAWAY, "args.x == 2", "args.missing > 1", 'args.s.matches("^a+$")'],
        {"args": {"x": 1, "s": "aaa"}},
    )
    assert got[0] is True
    assert isinstance(got[1], ConditionError)
    assert "ran longer than 0.25s" in str(got[1])
    assert got[2] is False  # the condition after the stopped one still ran
    assert isinstance(got[3], ConditionError)
    assert got[4] is True
    assert time.monotonic() - started < 5  # a loaded machine included


def test_a_deny_after_a_runaway_condition_still_wins() -> None:
    policy = load_text(
        yaml.safe_dump(
            {
                "version": 1,
                "default": "allow",
                "rules": [
                    {"name": "slow", "tools": ["create_task"], "when": RUNAWAY, "outcome": "allow"},
                    {"name": "no", "tools": ["create_task"], "when": "true", "outcome": "deny"},
                ],
            }
        )
    )
    denied = decide(policy, "1@x", Facts("create_task", "tasks", {}, "C1", "UALICE"))
    assert (denied.outcome, denied.rule) == ("deny", "no")


async def test_a_runaway_condition_fails_closed_without_stopping_the_event_loop() -> None:
    # The gate decides quick conditions on the event loop and the others in a thread: the
    # runaway one is cut off at its time, the decision asks, and the loop ran meanwhile.
    rules = [
        {"name": "slow", "tools": ["create_task"], "when": RUNAWAY, "outcome": "allow"},
        {"name": "tasks", "tools": ["create_task"], "outcome": "ask"},
    ]
    policy = load_text(yaml.safe_dump({"version": 1, "default": "allow", "rules": rules}))
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    ticker = asyncio.create_task(tick())
    started = time.monotonic()
    made = await decide_off_loop(policy, "1@x", Facts("create_task", "tasks", {}, "C1", "U1"))
    took = time.monotonic() - started
    ticker.cancel()
    assert (made.outcome, made.rule) == ("ask", "slow")
    assert "ran longer than 0.25s" in (made.reason or "")
    assert 0.25 <= took < 5  # a loaded machine included
    assert ticks >= 5  # the loop was free while the condition ran


def test_compiled_conditions_keep_cels_outcomes() -> None:
    facts = {"args": {"title": "OPS-12 fix", "n": 3, "tags": ["a", "b"]}, "groups": ["S0LEADS"]}
    got = evaluate_all(
        [
            "has(args.title)",  # a plain bool from the compiled code, not a BoolType
            "has(args.missing)",
            'args.title.matches("^OPS-[0-9]+") && "S0LEADS" in groups',
            'args.tags.exists(t, t == "b") && args.n + 1 == 4',
            "args.n > 2.5",  # no implicit int/double comparison in CEL
            "true || args.missing",
        ],
        facts,
    )
    assert got[:4] == [True, False, True, True]
    assert isinstance(got[4], ConditionError)
    assert got[5] is True


def test_a_rules_tools_match_as_fnmatchcase_reads_each_glob() -> None:
    # One compiled pattern per rule instead of a `fnmatchcase` per glob, tool and pack.
    patterns = ["create_task", "github_*", "wiki__[ab]*", "*", "t?sks", "a.b", "x|y", "(z)"]
    names = ["create_task", "github_merge", "github", "GITHUB_x", "wiki__bz", "wiki__cz", "tasks"]
    names += ["tisks", "a.b", "axb", "x|y", "x", "(z)", "z", "", "create_task\n"]
    for pattern in patterns:
        rule = Rule(name="r", tools=[pattern, "never"], outcome="ask")
        for name in names:
            assert names_tool(rule, name, "") is fnmatchcase(name, pattern), (pattern, name)
            by_pack = fnmatchcase("other", pattern) or (bool(name) and fnmatchcase(name, pattern))
            assert names_tool(rule, "other", name) is by_pack
