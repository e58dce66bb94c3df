"""What the one-door test finds: each violation has a kind (how the bot let the write run, and
why the reference refuses it), and each kind raises its own exception class, so hypothesis
tells the kinds apart and shrinks each one to its own shortest sequence."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from tests.one_door_reference import Call, Grant, Judgement


class Violation(AssertionError):
    """A violation of issue 25's invariant; each kind is a subclass (`violation_class`)."""

    kind = ""


_KINDS: dict[str, type[Violation]] = {}


def violation_class(kind: str) -> type[Violation]:
    if kind not in _KINDS:
        slug = re.sub(r"\W+", "_", kind).strip("_")[:80]
        _KINDS[kind] = type(f"Violation_{slug}", (Violation,), {"kind": kind})
    return _KINDS[kind]


@dataclass(frozen=True)
class Finding:
    kind: str
    detail: str
    story: str = ""


@dataclass
class Figures:
    sequences: int = 0
    steps: int = 0
    writes_judged: int = 0
    messages_checked: int = 0
    liveness_expected: int = 0
    liveness_met: int = 0
    findings: dict[str, list[Finding]] = field(default_factory=dict)
    operations: Counter[str] = field(default_factory=Counter)  # steps taken, by kind

    def add(self, finding: Finding) -> None:
        self.findings.setdefault(finding.kind, []).append(finding)

    def shortest(self, kind: str) -> Finding:
        return min(self.findings[kind], key=lambda f: f.story.count("\n"))


def path_of(decided_by: str | None) -> str:
    """How the bot says it decided (the proposal's `decided_by`)."""
    if not decided_by:
        return "unknown"
    if decided_by.startswith("policy:"):
        return "policy"
    if decided_by.startswith("grant:"):
        return "grant"
    if decided_by == "escalation":
        return "escalation"
    return "person"


def kind_of(judged: Judgement, decided_by: str | None, grant: Grant | None, call: Call) -> str:
    """The violation's kind: how the bot let the write run (its `decided_by`), and the
    reference's reason that way does not allow it now. `grant`: the reference's record of the
    grant the bot names, if it knows it."""
    path = path_of(decided_by)
    decision = judged.decision
    if decision.outcome == "deny":
        if decision.unevaluable:
            why = "by a deny rule whose condition cannot be evaluated"
        elif call.card_outcome == "deny" and call.revision > 1:
            why = "since an edit"
        elif call.card_outcome == "deny":
            why = "as it did when its card was made"
        else:
            why = "since its card was made"
        return f"ran ({path}) though the policy in force denies it, {why}"
    closed = " on a fail-closed ask" if decision.fail_closed else ""
    if path == "person" and decided_by is not None:
        refused = judged.votes.get(decided_by)
        if refused is not None:
            return f"ran on an approval{closed} that does not count now: {refused[0]}"
        if decided_by not in judged.votes:
            return f"ran{closed} on the approval of someone the reference saw no click from"
        return f"ran{closed} with fewer approvals than the quorum in force"
    if path == "grant":
        if grant is None:
            return f"ran{closed} under a grant the reference saw no one make"
        refused = next((r for g, r in judged.grants if g == grant), None)
        reason = refused[0] if refused else "it covers it"
        return f"ran{closed} under a grant that does not cover it now: {reason}"
    if path == "escalation":
        if decision.fail_closed:
            return "ran by escalation though the decision is a fail-closed ask"
        return "ran by escalation though the rule in force has no allow step due"
    if path == "policy":
        return f"ran as allowed by the policy though it needs {decision.describe()}"
    return f"ran ({path}) though it needs {decision.describe()}"
