"""Issue 25, "One door for every approval": a model-based test. A reference model of the
authorisation rules (tests/one_door_reference.py, written apart from the bot's code) runs beside
the real bot (SQLite, fake Slack and model) over random sequences of policy reloads, proposals,
edits, grants of each scope, clicks by anyone, user-group and membership changes, escalation
ticks, retries, outages and restarts (tests/one_door_machine.py).

Invariant: every write that ran was allowed, at its execution start, by the reference model for
exactly the arguments sent, and who asked for it (a turn's write is its requester's, also after
the turn resumed); every message posted was readable by everyone who can see where it
was posted; and the writes the reference says must happen do happen.

Four test functions of 24 sequences each (pytest-xdist may run them apart), each on one bot
reused across its sequences; the seeds are fixed, so CI runs the same sequences every time, and
each function checks that its sequences took every kind of step (a propose, an approve, a click,
an edit, a reload, a toggle, a tick, an approve during an outage, a retry; a restart in the
third; raises asked and approved, and turns continued on a budget's cheaper model, in the
fourth: tests/one_door_continues.py). `--hypothesis-profile=nightly` runs 200 sequences each
(docs/testing.md).
Each distinct violation is its own exception class: hypothesis reports each one, shrunk to its
shortest sequence, told step by step. A longer run:
`uv run python -m bench.one_door --sequences 2000` (figures in docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import run_state_machine_as_test

from bot.policy.engine import Facts, decide
from bot.policy.model import load_text
from bot.policy.untrusted import with_context
from bot.provenance import Source
from tests.one_door_bot import OneDoorBot
from tests.one_door_findings import Figures
from tests.one_door_machine import one_door_machine
from tests.one_door_policy import Policy
from tests.one_door_policy import decide as reference_decide
from tests.one_door_steps import INITIAL, Approve, Ask, Click, Continue, Propose, amended
from tests.one_door_world import PUBLIC, World

RAISE_KINDS = {"AskRaise", "ApproveRaise", "Continue"}
# Per test function: 72 in the suite, enough for every kind of step in each function's fixed
# sequences (asserted below); the nightly profile runs 600, the benchmark thousands.
SEQUENCES = 200 if settings.get_current_profile_name() == "nightly" else 24
STEPS = 4  # at most, after the first request
KINDS = {
    "Approve",
    "ApproveInOutage",
    "Click",
    "Edit",
    "Propose",
    "Reload",
    "Retry",
    "Tick",
    "Toggle",
}
# Passing, each function takes some 10-12 s on the development machine (2 busy cores). A
# failure is then shrunk to its shortest sequence, which may take minutes: the suite's 120 s
# time-out would cut off the one report that matters.
pytestmark = pytest.mark.timeout(900)


@pytest.fixture
def door() -> Iterator[OneDoorBot]:
    bot = OneDoorBot.open(Policy("ask", ()).text(1))
    yield bot
    bot.close()


def run(bot: OneDoorBot, which: int, restarts: bool, raises: bool = False) -> Figures:
    figures = Figures()
    machine = one_door_machine(bot, figures, restarts=restarts, raises=raises)
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
    # Fewer sequences than the nightly run, but none of the model's operations left out.
    kinds = KINDS | ({"Restart"} if restarts else set())
    if raises:  # the raises' own function: its steps, and clicks and reloads around them
        kinds = RAISE_KINDS | {"Approve", "Click", "Reload", "Propose"}
        assert kinds <= set(figures.operations), f"steps taken: {dict(figures.operations)}"
    else:
        assert set(figures.operations) == kinds, f"steps taken: {dict(figures.operations)}"
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


def test_one_door_budget_raises(door: OneDoorBot) -> None:
    """Issue 29: budget raises asked by anyone (the paused turn's requester, an owner, a
    stranger, the guest), approved by random actors (owners, non-owners, the asker, after a
    reload changing the owners or a rule naming raises), among the other steps: a raise runs
    only when the reference allows it, and never past the limit its card showed. And turns
    paused at a budget in the thread of another person's waiting proposal, continued on its
    cheaper model (or refused, clicked by someone else): each turn's next write is filed as
    its own requester's and decided as the reference says (f4a1ee3)."""
    figures = run(door, 4, restarts=False, raises=True)
    assert figures.writes_judged > 0
    assert figures.liveness_expected > 0


# Sequences the random ones reach rarely, told step by step (issue 27): a grant made before a
# call that followed a tool result must not cover it; an allow must not either (a card the
# requester decides instead, and their click runs it); a rule saying `after_untrusted: allow`
# still allows; a member's message in the thread is covered as before.
UNTRUSTED: list[tuple[list[str], Ask, list[object]]] = [
    ([], Ask(), [Approve("an approver", "channel"), Propose(Ask(place="C1+read"))]),
    ([], Ask(), [Approve("an approver", "me"), Propose(Ask(place="C1+read", thread=0))]),
    (["allow low priority first"], Ask(place="C1+read", priority="low"), []),
    (
        ["allow low priority first"],
        Ask(place="C1+read", priority="low"),
        [Approve("the requester", "approve")],
    ),
    (["allow low priority, even after a tool result"], Ask(place="C1+read", priority="low"), []),
    (
        ["allow high priority, but deny it after untrusted input"],
        Ask(place="C1+read", priority="high"),
        [Approve("an approver", "approve")],
    ),
    (
        ["allow low priority first"],
        Ask(),
        [Propose(Ask(place="C1+member", thread=0, priority="low"))],
    ),
]


def test_one_door_after_untrusted_input(door: OneDoorBot) -> None:
    figures = Figures()
    machine = one_door_machine(door, figures)
    for changes, first, steps in UNTRUSTED:
        sequence: Any = machine()  # the generated class: its `start` and `step`, by hand
        sequence.start(changes, first)
        for step in steps:
            sequence.step(step)
        sequence.teardown()
    assert figures.liveness_met == figures.liveness_expected
    assert figures.liveness_expected >= 3  # the allows that must run did


# Turns continued on a cheaper model beside a turn waiting in the same thread, told step by
# step: Dana's turn pauses in Alice's thread and she continues it; Alice's proposal approved,
# her turn goes on as hers, and its next write is Alice's (under four-eyes her own approval
# must not run it; when the requester decides, Dana's click must not); a Continue clicked by
# someone else than the pauser leaves the turn paused.
CONTINUED: list[tuple[list[str], list[object]]] = [
    (
        ["Alice approves too", "four-eyes on"],
        [
            Continue("UDANA", "the pauser", writes=True),
            Approve("another approver", "approve", back=1),
            Approve("the requester", "approve"),
        ],
    ),
    (
        ["nobody named: the requester decides"],
        [
            Continue("UDANA", "the pauser"),
            Approve("the requester", "approve"),
            Click("UDANA", "approve", stale=False),
        ],
    ),
    (
        [],
        [
            Continue("UCAROL", "the waiting requester", writes=True),
            Continue("UDANA", "an approver", writes=True, back=1),
            Approve("an approver", "approve", back=1),
        ],
    ),
]


def test_one_door_turns_continued_on_a_cheaper_model(door: OneDoorBot) -> None:
    """The four-eyes and requester rules hold a resumed turn's next write to its own
    requester (the attribution finding, a turn's write filed as another person's, is counted
    without failing the sequence, so that the invariant itself is seen to fail first; none
    may be found at all)."""
    figures = Figures()
    machine = one_door_machine(door, figures, lambda f: "filed as" not in f.kind, raises=True)
    for changes, steps in CONTINUED:
        sequence: Any = machine()
        sequence.start(changes, Ask())
        for step in steps:
            sequence.step(step)
        sequence.teardown()
    assert not figures.findings, sorted(figures.findings)
    assert figures.liveness_met == figures.liveness_expected
    assert figures.operations["Continue"] == 4


# Reads and open-world tools beside writes, after no input, a member's message or a tool
# result: the bot's decision (`bot.policy.engine`, given the sources explicitly) against the
# reference's, over the generated policies. Pure functions: cheap enough for many examples.
TOOLS = {  # name -> (pack, a read, open-world)
    "create_task": ("tasks", False, False),
    "list_tasks": ("tasks", True, False),
    "web__fetch": ("web", True, True),
    "web__lookup": ("web", True, False),
}


@settings(max_examples=150, deadline=None, database=None)
@given(
    changes=st.lists(st.sampled_from(INITIAL), max_size=3),
    tool=st.sampled_from(sorted(TOOLS)),
    followed=st.sampled_from(["nothing", "member", "tool"]),
    priority=st.sampled_from(["normal", "low", "high", "urgent"]),
    assignee=st.sampled_from([None, "UDANA", "UBOB"]),
    requester=st.sampled_from(["UALICE", "UCAROL"]),
)
def test_reads_and_open_world_tools_decide_as_the_reference_says(
    changes: list[str],
    tool: str,
    followed: str,
    priority: str,
    assignee: str | None,
    requester: str,
) -> None:
    policy = amended(changes)
    world = World.initial()
    pack, read, open_world = TOOLS[tool]
    args = {"title": "t", "priority": priority, "assignee": assignee}
    sources = {"member": [Source("member", "message", "UBOB")], "tool": [Source("tool", "x")]}
    facts = Facts(
        tool, pack, args, PUBLIC, requester, tuple(sorted(world.groups_of(requester))),
        read_only=read, open_world=open_world,
    )  # fmt: skip
    bot = decide(load_text(policy.text(1)), "1@x", with_context(facts, sources.get(followed, [])))
    ref = reference_decide(
        policy, tool, args, PUBLIC, requester, world, outside=followed == "tool", read=read,
        open_world=open_world, untrusted=followed != "nothing",
    )  # fmt: skip
    story = f"{policy.describe()}; {tool} after {followed} with {args}: reference {ref.describe()}"
    assert bot.outcome == ref.outcome, f"{story}; the bot: {bot}"
    if bot.outcome == "ask":
        named = ref.rule.approvers if ref.rule is not None else ()
        assert tuple(bot.record().get("approvers") or ()) == named, story
        assert bot.failed_closed == ref.fail_closed, story
        if not ref.fail_closed:
            assert (bot.after_untrusted == "ask") == ref.no_grants, story
