"""Issue 25, "One door for every approval": a model-based test. A reference model of the
authorisation rules (tests/one_door_reference.py, written apart from the bot's code) runs beside
the real bot (SQLite, fake Slack and model) over random sequences of policy reloads, proposals,
edits, grants of each scope, clicks by anyone, user-group and membership changes, escalation
ticks, retries, outages and restarts (tests/one_door_machine.py).

Invariant: every write that ran was allowed, at its execution start, by the reference model for
exactly the arguments sent; every message posted was readable by everyone who can see where it
was posted; and the writes the reference says must happen do happen.

Three test functions of 70 sequences each (pytest-xdist may run them apart), each on one bot
reused across its sequences; the seeds are fixed, so CI runs the same sequences every time.
Each distinct violation is its own exception class: hypothesis reports each one, shrunk to its
shortest sequence, told step by step. A longer run:
`uv run python -m bench.one_door --sequences 2000` (figures in docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, Phase, seed, settings
from hypothesis.stateful import run_state_machine_as_test

from tests.one_door_bot import OneDoorBot
from tests.one_door_findings import Figures
from tests.one_door_machine import one_door_machine
from tests.one_door_policy import Policy

SEQUENCES = 70  # per test function: 210 in the suite (the benchmark runs thousands)
STEPS = 4  # at most, after the first request
# Passing, each function takes some 25-30 s on the development machine (2 busy cores). A
# failure is then shrunk to its shortest sequence, which may take minutes: the suite's 120 s
# time-out would cut off the one report that matters.
pytestmark = pytest.mark.timeout(900)


@pytest.fixture
def door() -> Iterator[OneDoorBot]:
    bot = OneDoorBot.open(Policy("ask", ()).text(1))
    yield bot
    bot.close()


def run(bot: OneDoorBot, which: int, restarts: bool) -> Figures:
    figures = Figures()
    machine = one_door_machine(bot, figures, restarts=restarts)
    seed(25_000 + which)(machine)
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=SEQUENCES,
            stateful_step_count=STEPS,
            deadline=None,
            database=None,
            phases=[Phase.generate, Phase.target, Phase.shrink, Phase.explain],
            suppress_health_check=list(HealthCheck),
        ),
    )
    assert figures.sequences >= SEQUENCES
    assert figures.liveness_met == figures.liveness_expected
    return figures


def test_one_door_first_hundred(door: OneDoorBot) -> None:
    figures = run(door, 1, restarts=False)
    assert figures.writes_judged > 0


def test_one_door_second_hundred(door: OneDoorBot) -> None:
    figures = run(door, 2, restarts=False)
    assert figures.writes_judged > 0


def test_one_door_third_hundred_with_restarts(door: OneDoorBot) -> None:
    figures = run(door, 3, restarts=True)
    assert figures.writes_judged > 0
