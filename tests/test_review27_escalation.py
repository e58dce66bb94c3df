"""Review of issue 27: an ask rule whose escalation ladder ends in `allow` approved a call
proposed after outside input once nobody answered, so a file or a tool result could get a
write run with no person's click. After such input no allow stands, the ladder's included
(design promises 8, 9)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from bot.approvals.escalation import ladder
from bot.approvals.ruling import Question, Ruling
from bot.policy.deciders import ladder_allows, record_of
from bot.policy.engine import Facts, decide
from bot.policy.model import load_text
from bot.policy.untrusted import with_context
from bot.provenance import Source

POLICY = load_text("""\
version: 1
default: ask
rules:
  - name: tasks
    tools: [create_task]
    outcome: ask
    approvers: [UBOB]
    escalate:
      - after: 30m
      - after: 1h
        outcome: allow
""")
FILE = Source("file", "invoice.pdf", "UEVE")
MEMBER = Source("member", "message", "UBOB")


def ruled(*sources: Source) -> tuple[Question, Ruling]:
    facts = with_context(Facts("create_task", "tasks", {}, "C1", "UALICE"), sources)
    decision = decide(POLICY, "1@x", facts)
    created = datetime.now(UTC) - timedelta(hours=2)  # the ladder's allow is long due
    question = Question(
        team_id="T1", tool="create_task", pack="tasks", arguments={}, channel="C1",
        thread_ts=None, requester="UALICE", audience="", created_at=created, sources=sources,
    )  # fmt: skip
    record = record_of(decision, question)
    ruling = Ruling("ask", "1@x", decision.rule, None, record)
    return replace(question, recorded=record), ruling


def test_an_escalations_allow_does_not_run_a_call_proposed_after_a_file() -> None:
    question, ruling = ruled(FILE)
    assert ruling.record.get("after_untrusted") == "ask"
    assert [s.kind for s in ladder(ruling.record)] == ["remind"]  # the reminder stays
    assert not ladder_allows(ruling, question)


def test_it_still_does_after_nothing_or_a_teammates_message() -> None:
    for sources in ((), (MEMBER,)):
        question, ruling = ruled(*sources)
        assert [s.kind for s in ladder(ruling.record)] == ["remind", "allow"]
        assert ladder_allows(ruling, question)
