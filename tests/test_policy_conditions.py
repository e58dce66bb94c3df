"""How a decision evaluates its conditions (bench/policy.py found the old way slow: a thread
and a trace function for every condition, about 1.5 ms each before celpy did any work): one
worker thread per decision, the facts converted once, and a watchdog that stops only the
condition that runs too long."""

from __future__ import annotations

import sys
import threading
import time
from fnmatch import fnmatchcase
from typing import Any

import pytest
import yaml

from bot.policy.cel import ConditionError, evaluate_all
from bot.policy.engine import Facts, decide, names_tool
from bot.policy.model import Rule, load_text

TEN = "[1,2,3,4,5,6,7,8,9,10]"
RUNAWAY = f"{TEN}.all(a, {TEN}.all(b, {TEN}.all(c, {TEN}.all(d, {TEN}.all(e, a + e > 0)))))"


def test_a_decisions_conditions_run_in_one_worker_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[str] = []
    real = threading.Thread

    class Counted(real):  # type: ignore[misc, valid-type]
        def start(self) -> None:
            started.append(self.name)
            super().start()

    monkeypatch.setattr(threading, "Thread", Counted)
    rules: list[dict[str, Any]] = [
        {"name": f"r{i}", "tools": ["create_task"], "when": f'args.priority == "p{i}"'}
        | {"outcome": ("allow", "deny")[i % 2]}
        for i in range(40)
    ]
    rules.append({"name": "tasks", "tools": ["create_task"], "outcome": "ask"})
    policy = load_text(yaml.safe_dump({"version": 1, "rules": rules}))
    facts = Facts("create_task", "tasks", {"priority": "normal"}, "C1", "UALICE")
    decision = decide(policy, "1@x", facts)
    assert (decision.outcome, decision.rule) == ("ask", "tasks")
    assert started == ["policy-conditions"]  # one worker for 40 conditions, not one each
    assert sys.gettrace() is None  # and no trace function slowing every call


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
