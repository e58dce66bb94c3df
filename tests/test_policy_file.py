"""The policy file as operators handle it: an invalid file refuses the start (exit 2, the line
named), an edit is in force within 5 s without a restart and an invalid edit keeps the old
version, and `countersign policy check|test|replay` with their exit codes and figures."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select

from bot.approvals.questions import record_ruling
from bot.approvals.ruling import Question, Ruling, Step
from bot.db.migrate import upgrade_to_head
from bot.db.models import PolicyDecision, Proposal, ProposalState, utcnow
from bot.db.session import Database
from bot.policy.cel import MAX_CONTEXT, ConditionError, evaluate
from bot.policy.engine import Decision, Facts, decide
from bot.policy.model import PolicyError, load_text
from bot.policy.source import PolicySource
from bot.records.retention import purge
from tests.fakes.openai import FakeOpenAI
from tests.fakes.slack import FakeSlack, wait_until
from tests.harness import RunningBot, clean_env, make_settings, run_cli, start_bot, stop_bot
from tests.test_approvals_flow import CREATE, tool_results
from tests.test_policy import POLICY, ask_for

BASE = {"SLACK_BOT_TOKEN": "xoxb-1", "OPENAI_API_KEY": "sk-x", "SLACK_SIGNING_SECRET": "s"}

INVALID = """\
version: 1
default: ask
rules:
  - name: typo
    tools: [create_task]
    outcome: alow
"""

ALLOW_ALL = """\
version: 2
default: allow
rules: []
"""


def test_an_invalid_file_at_start_exits_2_naming_the_line(tmp_path: Path) -> None:
    (tmp_path / "policy.yaml").write_text(INVALID)  # found by default in the working directory
    result = run_cli(["run"], clean_env(**BASE), tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "POLICY_FILE" in result.stderr
    assert "line 6" in result.stderr
    assert "outcome" in result.stderr


def test_a_condition_that_does_not_parse_names_its_line() -> None:
    text = POLICY.replace("'args.priority == \"low\"'", "'args.priority == '")
    with pytest.raises(PolicyError) as raised:
        load_text(text)
    assert raised.value.line == 6
    assert "does not parse" in raised.value.reason


@pytest.fixture
async def reloading_bot(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, tmp_path: Path
) -> AsyncIterator[tuple[RunningBot, Path]]:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    running = await start_bot(make_settings(fake_slack, fake_model, sqlite_url, policy_file=path))
    yield running, path
    await stop_bot(running)


async def test_an_edit_is_in_force_within_5_s_and_an_invalid_edit_keeps_the_old(
    reloading_bot: tuple[RunningBot, Path],
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    caplog: pytest.LogCaptureFixture,
) -> None:
    bot, path = reloading_bot
    source = bot.countersign.policy
    assert source is not None
    first = source.current.version
    await ask_for(bot, fake_slack, fake_model, CREATE, channel="CBOTS")
    assert tool_results(fake_model)[-1]["status"] == "denied"
    path.write_text(ALLOW_ALL)
    edited = time.monotonic()
    while source.current.version == first:
        assert time.monotonic() - edited < 5, "the edit was not in force within 5 s"
        await asyncio.sleep(0.1)
    assert source.current.version.startswith("2@")
    await ask_for(bot, fake_slack, fake_model, CREATE, channel="CBOTS")
    assert tool_results(fake_model)[-1]["status"] != "denied"
    assert fake_slack.cards("CBOTS") == []  # allowed by the default now
    second = source.current.version
    caplog.set_level(logging.ERROR, logger="bot.policy.source")
    path.write_text(INVALID)
    await wait_until(lambda: "stays in force" in caplog.text, timeout=5)  # a poll read it
    assert source.current.version == second  # the invalid edit is not in force
    assert f"version {second} stays in force: line 6: rules.0.outcome" in caplog.text
    path.unlink()  # a file that goes away leaves the version in force too
    await wait_until(lambda: "unreadable" in caplog.text, timeout=5)
    await asyncio.sleep(2.5)  # one more poll: it is not said again
    assert source.current.version == second
    assert caplog.text.count("unreadable") == 1  # said once, not every poll
    await ask_for(bot, fake_slack, fake_model, CREATE, channel="CBOTS")
    assert fake_slack.cards("CBOTS") == []


FIXTURES = """\
- name: low priority runs
  tool: create_task
  args: {priority: low}
  expect: allow
  rule: low-priority-tasks
- name: bots channel is denied
  tool: create_task
  pack: tasks
  channel: CBOTS
  args: {priority: low}
  expect: deny
- name: others ask bob
  tool: update_task
  args: {priority: high}
  expect: ask
  rule: tasks
"""


def test_policy_check_and_test_exit_codes(tmp_path: Path) -> None:
    env = clean_env()
    (tmp_path / "policy.yaml").write_text(POLICY)
    (tmp_path / "bad.yaml").write_text(INVALID)
    (tmp_path / "fixtures.yaml").write_text(FIXTURES)
    ok = run_cli(["policy", "check"], env, tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert "valid, version 1@" in ok.stdout
    bad = run_cli(["policy", "check", "bad.yaml"], env, tmp_path)
    assert bad.returncode == 1
    assert "line 6" in bad.stderr
    passed = run_cli(["policy", "test", "fixtures.yaml"], env, tmp_path)
    assert passed.returncode == 0, passed.stdout
    assert "3 passed, 0 failed" in passed.stdout
    (tmp_path / "wrong.yaml").write_text(FIXTURES.replace("expect: deny", "expect: allow"))
    failed = run_cli(["policy", "test", "wrong.yaml"], env, tmp_path)
    assert failed.returncode == 1
    assert "FAIL  bots channel is denied: expected allow, got deny" in failed.stdout
    invalid = run_cli(["policy", "test", "fixtures.yaml", "--policy", "bad.yaml"], env, tmp_path)
    assert invalid.returncode == 2


NEW_POLICY = """\
version: 2
default: ask
rules:
  - name: no-urgent
    tools: [create_task]
    when: 'args.priority == "urgent"'
    outcome: deny
  - name: bots-ok
    tools: [create_task]
    channels: [CBOTS]
    outcome: allow
  - name: low
    tools: [create_task]
    when: 'args.priority == "low"'
    outcome: allow
  - name: normal-ok
    tools: [create_task]
    when: 'args.priority == "normal"'
    outcome: allow
"""


async def seed(url: str) -> None:
    """Six recorded decisions: three asks approved by people (one urgent), one ask declined,
    one deny in CBOTS and one allow."""
    db = Database.from_url(url)
    await upgrade_to_head(db)
    async with db.transaction() as session:
        rows = [
            ("ask", "urgent", ProposalState.SUCCEEDED, "UBOB", "C1"),
            ("ask", "low", ProposalState.SUCCEEDED, "UBOB", "C1"),
            ("ask", "normal", ProposalState.DECLINED, "UBOB", "C1"),
            ("ask", "high", ProposalState.SUCCEEDED, "UBOB", "C1"),
            ("deny", "high", None, None, "CBOTS"),
            ("allow", "low", ProposalState.SUCCEEDED, "policy:low", "C1"),
        ]
        for number, (outcome, priority, state, by, channel) in enumerate(rows):
            facts = Facts("create_task", "tasks", {"priority": priority}, channel, "UALICE")
            proposal_id = None
            if state is not None:
                proposal = Proposal(
                    team_id="T1",
                    tool_call_id=f"c{number}",
                    tool_name="create_task",
                    arguments={"priority": priority},
                    arguments_hash="",
                    description="Create a task",
                    preview=[],
                    requester="UALICE",
                    idempotency_key=f"k{number}",
                    state=state,
                    version=1,
                    expires_at=utcnow(),
                    channel_id=channel,
                    decided_by=by,
                )
                session.add(proposal)
                await session.flush()
                proposal_id = proposal.id
            rule = {"ask": None, "deny": "no-bots", "allow": "low"}[outcome]
            reason = "no bots" if outcome == "deny" else None
            question = Question(
                "T1", facts.tool, facts.pack, facts.args, channel, "1.0", "UALICE", None
            )
            ruling = Ruling(outcome, "1@seed", rule, reason)  # type: ignore[arg-type]
            record_ruling(session, question, ruling, Step.PROPOSE, None, proposal_id)
            if proposal_id is not None:  # a click on the same revision: replayed once
                record_ruling(session, question, ruling, Step.VOTE, "UBOB", proposal_id)
    await db.dispose()


async def test_policy_replay_figures_on_a_seeded_database(
    tmp_path: Path, migrated_database_url: str
) -> None:
    await seed(migrated_database_url)
    (tmp_path / "new.yaml").write_text(NEW_POLICY)
    env = clean_env(**BASE, DATABASE_URL=migrated_database_url)
    result = await asyncio.to_thread(
        run_cli, ["policy", "replay", "--since", "30d", "--policy", "new.yaml"], env, tmp_path
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "replayed 6 decision(s)" in out
    # the urgent (deny), the low and the normal (allow); the high still asks
    assert "asks it would have removed: 3" in out
    assert "past approvals it would have denied: 1" in out
    approved = "proposal 1 revision 1: create_task by UALICE in C1, approved by UBOB"
    assert f"{approved}: denied by no-urgent" in out
    assert "denials it would have allowed: 2" in out
    declined = "proposal 3 revision 1: create_task by UALICE in C1, declined by a person"
    assert f"{declined}: allowed by normal-ok" in out
    denied = "create_task by UALICE in CBOTS, denied by no-bots"
    assert f"denied call #9: {denied}: allowed by bots-ok" in out


def test_approval_policies_are_read_into_the_same_rules() -> None:
    raw = {
        "*": {"approvers": ["UOPS"], "expires_after_minutes": 30},
        "tasks": {"four_eyes": True},
        "create_task": {"approvals_required": 2},
    }
    packs = {"create_task": "tasks", "update_task": "tasks"}
    source = PolicySource(None, raw, lambda name: packs.get(name, ""))
    policy, version = source.current.policy, source.current.version
    assert version.startswith("env@")

    def asked(tool: str) -> dict[str, object]:
        made = decide(policy, version, Facts(tool, packs.get(tool, ""), {}, "C1", "UALICE"))
        assert made.outcome == "ask"
        return made.record()

    create = asked("create_task")  # its own entry over its pack's over "*"
    assert (create["approvers"], create["four_eyes"], create["approvals_required"]) == (
        ["UOPS"],
        True,
        2,
    )
    assert create["timeout"] == "1800s"
    update = asked("update_task")  # the pack's entry over "*"
    assert (update["four_eyes"], update["approvals_required"]) == (True, 1)
    other = asked("post_message")  # "*" only
    assert (other["approvers"], other["four_eyes"]) == (["UOPS"], False)


FAIL_CLOSED = load_text("""\
version: 1
default: allow
rules:
  - name: leads-ask
    tools: [create_task]
    when: 'args.missing == 1'
    outcome: ask
    approvers: [S0LEADS]
  - name: allow-low
    tools: [create_task]
    when: 'args.priority == "low"'
    outcome: allow
  - name: no-bots
    tools: [create_task]
    channels: [CBOTS]
    outcome: deny
""")


def test_a_broken_condition_asks_the_rules_approvers_and_a_later_deny_still_wins() -> None:
    def made(channel: str) -> Decision:
        facts = Facts("create_task", "tasks", {"priority": "low"}, channel, "UALICE")
        return decide(FAIL_CLOSED, "1@x", facts)

    asked = made("C1")  # the allow would have run it: the broken rule turns it to ask
    assert (asked.outcome, asked.rule) == ("ask", "leads-ask")
    assert asked.record()["approvers"] == ["S0LEADS"]
    assert asked.reason is not None
    assert "could not be evaluated" in asked.reason
    assert made("CBOTS").outcome == "deny"


LINTED = """\
version: 1
rules:
  - name: every-task-asks
    tools: [create_task]
    outcome: ask
    four_eyes: true
  - name: low-runs
    tools: [create_task]
    when: 'args.priority == "low"'
    outcome: allow
"""


def test_policy_check_warns_and_strict_fails_on_warnings(tmp_path: Path) -> None:
    env = clean_env()
    (tmp_path / "policy.yaml").write_text(POLICY)
    (tmp_path / "linted.yaml").write_text(LINTED)
    clean = run_cli(["policy", "check", "--strict"], env, tmp_path)
    assert clean.returncode == 0, clean.stdout
    assert "warning" not in clean.stdout
    warned = run_cli(["policy", "check", "linted.yaml"], env, tmp_path)
    assert warned.returncode == 0
    assert "rule 'low-runs' is never reached" in warned.stdout
    assert "rule 'every-task-asks': four_eyes without approvers: nobody may approve" in (
        warned.stdout
    )
    assert run_cli(["policy", "check", "--strict", "linted.yaml"], env, tmp_path).returncode == 1


def test_hostile_conditions_and_arguments_are_bounded() -> None:
    started = time.monotonic()
    backtracking = "args.s.matches('(a+)+$')"  # exponential for a backtracking engine
    assert evaluate(backtracking, {"args": {"s": "a" * 40 + "!"}}) is False
    with pytest.raises(ConditionError, match="longer than"):
        evaluate('args.s == "x"', {"args": {"s": "x" * (MAX_CONTEXT + 1)}})
    ten = "[1,2,3,4,5,6,7,8,9,10]"
    nested = f"{ten}.all(a, {ten}.all(b, {ten}.all(c, {ten}.all(d, a + b + c + d > 0))))"
    with pytest.raises(ConditionError, match=r"ran longer than|did not finish"):
        evaluate(nested, {})
    assert time.monotonic() - started < 5  # a loaded machine included


CONTRACT_EXAMPLE = """\
version: 1
default: ask                          # when no rule matches
rules:                                # first match wins, except that any matching deny wins
  - name: low-priority-tasks
    tools: [create_task]              # tool names, pack names or globs (github_*, wiki__*)
    when: 'args.priority == "low"'
    outcome: allow
  - name: no-urgent-tasks-from-bots-channel
    tools: [create_task]
    channels: [CBOTS]
    outcome: deny
    reason: urgent work is not filed from this channel
  - name: tasks
    tools: [create_task, update_task]
    outcome: ask
    approvers: [UBOB, S0LEADS]        # users or user groups
    approvals_required: 1
    four_eyes: true
    route: dm                         # thread (default) | dm | channel:C123
    grants: [once, thread, channel, me]
    grant_expiry: 8h
    escalate:
      - after: 30m
        to: [UCAROL]
      - after: 2h
        outcome: deny
"""


def test_the_contracts_example_parses_and_an_ask_keeps_route_grants_and_escalation() -> None:
    policy = load_text(CONTRACT_EXAMPLE)
    facts = Facts("update_task", "tasks", {"priority": "high"}, "C1", "UALICE")
    made = decide(policy, "1@x", facts).record()
    assert made["rule"] == "tasks"
    assert made["approvers"] == ["UBOB", "S0LEADS"]
    assert made["route"] == "dm"
    assert made["grants"] == ["once", "thread", "channel", "me"]
    assert made["grant_expiry"] == "8h"
    assert made["escalate"] == [
        {"after": "30m", "to": ["UCAROL"]},
        {"after": "2h", "to": [], "outcome": "deny"},
    ]
    with pytest.raises(PolicyError) as raised:
        load_text(CONTRACT_EXAMPLE.replace("grant_expiry: 8h", "grant_expiry: 8 weeks"))
    assert raised.value.line == 21


def test_the_example_policy_passes_its_fixtures_with_packs_and_defaults_applied() -> None:
    root = Path(__file__).parent.parent
    env = clean_env()
    env.pop("TOOL_PACKS", None)
    args = ["policy", "check", "--strict", "examples/policy.yaml"]
    assert run_cli(args, env, root).returncode == 0
    tested = run_cli(
        ["policy", "test", "examples/policy_fixtures.yaml", "--policy", "examples/policy.yaml"],
        env,
        root,
    )
    assert tested.returncode == 0, tested.stdout
    assert "8 passed, 0 failed" in tested.stdout
    # No args.priority given: the schema's default ("normal") decides, not a failed condition.
    assert "ok    a task without a priority is normal, so it asks: ask (tasks)" in tested.stdout


def test_approval_policies_come_after_the_files_own_rules(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    source = PolicySource(path, {"create_task": {"approvers": ["UOPS"]}}, lambda _n: "tasks")
    source.load()
    names = [r.name for r in source.current.policy.rules]
    assert names == [
        "low-priority-tasks",
        "no-tasks-from-bots",
        "tasks",
        "APPROVAL_POLICIES[create_task]",
    ]
    facts = Facts("create_task", "tasks", {"priority": "high"}, "C1", "UALICE")
    assert decide(source.current.policy, "v", facts).rule == "tasks"  # the file's rule first


async def test_retention_forgets_old_decisions_with_their_arguments(sqlite_url: str) -> None:
    await seed(sqlite_url)
    db = Database.from_url(sqlite_url)
    try:
        async with db.transaction() as session:
            first = await session.get(PolicyDecision, 1)
            assert first is not None
            first.created_at = utcnow() - timedelta(days=40)
        await purge(db, timedelta(days=30))
        async with db.transaction() as session:
            kept = (await session.scalars(select(PolicyDecision.id))).all()
    finally:
        await db.dispose()
    assert sorted(kept) == list(range(2, 12))  # 6 revisions, 11 decisions (5 also clicked)
