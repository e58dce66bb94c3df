"""The policy file decides every write call first, through the front door: allow runs
without a card (note + audit row), deny reaches the model and makes nothing, ask makes a card
with the rule's approvers; deny wins; a broken condition asks; shadow rules are recorded only;
counts and user groups in conditions."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import select

from bot.db.models import PolicyDecision, ProposalState
from bot.slack import cards
from tests.data_blocks import unwrapped
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack
from tests.harness import RunningBot, make_settings, start_bot, stop_bot
from tests.test_approvals_flow import CREATE, audit, call, proposals, tasks_in_db, tool_results

LOW = {**CREATE, "priority": "low"}
METRIC = "countersign_policy_decisions_total"

POLICY = """\
version: 1
default: ask
rules:
  - name: low-priority-tasks
    tools: [create_task]
    when: 'args.priority == "low"'
    outcome: allow
  - name: no-tasks-from-bots
    tools: [tasks]
    channels: [CBOTS]
    outcome: deny
    reason: work is not filed from this channel
  - name: tasks
    tools: [create_task, update_task]
    outcome: ask
    approvers: [UBOB]
    four_eyes: true
"""


@pytest.fixture
async def policy_bot(
    request: pytest.FixtureRequest,
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    migrated_database_url: str,
    tmp_path: Path,
) -> AsyncIterator[RunningBot]:
    path = tmp_path / "policy.yaml"
    path.write_text(getattr(request, "param", POLICY))
    url = migrated_database_url
    running = await start_bot(
        make_settings(fake_slack, fake_model, url, policy_file=path, streaming="auto")
    )
    yield running
    await stop_bot(running)


async def ask_for(
    bot: RunningBot,
    slack: FakeSlack,
    model: FakeOpenAI,
    args: dict[str, Any],
    channel: str = "C1",
    user: str = "UALICE",
    thread_ts: str | None = None,
) -> str:
    """The mention's ts: the thread it starts."""
    model.script(Script(tool_calls=[call("create_task", args)]), Script(text="noted"))
    ts = await bot.mention(channel, "track it", slack, user=user, thread_ts=thread_ts)
    await bot.idle()
    return thread_ts or ts


async def decisions(bot: RunningBot, step: str | None = "propose") -> list[PolicyDecision]:
    """The decisions recorded at `step` (None: at every step: proposal, clicks, execution)."""
    async with bot.countersign.db.transaction() as session:
        query = select(PolicyDecision).order_by(PolicyDecision.id)
        if step is not None:
            query = query.where(PolicyDecision.step == step)
        return list((await session.scalars(query)).all())


async def test_allow_runs_without_a_card_with_a_note_and_an_audit_row(
    policy_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = policy_bot
    await ask_for(bot, fake_slack, fake_model, LOW)
    assert fake_slack.cards("C1") == []
    (task,) = await tasks_in_db(bot)
    assert task.title == LOW["title"]
    (proposal,) = await proposals(bot)
    assert proposal.state == ProposalState.SUCCEEDED
    assert proposal.decided_by == "policy:low-priority-tasks"
    version = bot.countersign.policy.current.version if bot.countersign.policy else ""
    assert version.startswith("1@")
    approve = next(a for a in await audit(bot) if a.event == "approve")
    assert approve.actor == "policy:low-priority-tasks"
    assert approve.detail is not None
    assert approve.detail["rule"] == "low-priority-tasks"
    assert approve.detail["policy_version"] == version
    notes = [m.text for m in fake_slack.bot_messages("C1") if "Allowed by policy rule" in m.text]
    assert len(notes) == 1
    assert "`low-priority-tasks`" in notes[0]
    assert tool_results(fake_model)[0]["status"] != "denied"
    (decision,) = await decisions(bot)
    assert (decision.outcome, decision.rule, decision.policy_version) == (
        "allow",
        "low-priority-tasks",
        version,
    )


async def test_deny_reaches_the_model_and_makes_no_card_or_write(
    policy_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = policy_bot
    await ask_for(bot, fake_slack, fake_model, CREATE, channel="CBOTS")
    assert tool_results(fake_model) == [
        {
            "status": "denied",
            "reason": "forbidden by policy: work is not filed from this channel, do not retry",
        }
    ]
    assert fake_slack.cards("CBOTS") == []
    assert await proposals(bot) == []
    assert await tasks_in_db(bot) == []
    (decision,) = await decisions(bot)
    assert (decision.outcome, decision.rule, decision.proposal_id) == (
        "deny",
        "no-tasks-from-bots",
        None,
    )


async def test_deny_wins_over_an_earlier_allow(
    policy_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = policy_bot
    await ask_for(bot, fake_slack, fake_model, LOW, channel="CBOTS")  # low-priority allows first
    assert tool_results(fake_model)[0]["status"] == "denied"
    assert await tasks_in_db(bot) == []
    assert fake_slack.cards("CBOTS") == []


async def test_ask_makes_a_card_with_the_rules_approvers(
    policy_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = policy_bot
    await ask_for(bot, fake_slack, fake_model, CREATE)
    (card,) = fake_slack.cards("C1")
    (proposal,) = await proposals(bot)
    assert proposal.policy is not None
    assert proposal.policy["rule"] == "tasks"
    assert proposal.policy["approvers"] == ["UBOB"]
    await bot.click(card, cards.APPROVE, "UALICE", "C1")  # four-eyes: not the requester
    await bot.idle()
    assert await tasks_in_db(bot) == []
    assert "someone other than the requester" in fake_slack.ephemerals_for("UALICE")[0]
    await bot.click(card, cards.APPROVE, "UBOB", "C1")
    await bot.idle()
    assert len(await tasks_in_db(bot)) == 1
    assert (await proposals(bot))[0].decided_by == "UBOB"


BROKEN = """\
version: 1
default: allow
rules:
  - name: broken
    tools: [create_task]
    when: 'args.no_such_field > 3'
    outcome: allow
"""


@pytest.mark.parametrize("policy_bot", [BROKEN], indirect=True)
async def test_a_condition_that_cannot_be_evaluated_fails_closed_to_ask(
    policy_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = policy_bot
    await ask_for(bot, fake_slack, fake_model, CREATE)
    assert len(fake_slack.cards("C1")) == 1  # the default would have allowed it
    assert await tasks_in_db(bot) == []
    (decision,) = await decisions(bot)
    assert decision.outcome == "ask"
    assert decision.reason is not None
    assert "could not be evaluated" in decision.reason


SLOW = """\
version: 1
default: allow
rules:
  - name: hostile
    tools: [create_task]
    when: >-
      [1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b,
      [1,2,3,4,5,6,7,8,9,10].all(c, [1,2,3,4,5,6,7,8,9,10].all(d, a + b + c + d > 0))))
    outcome: allow
"""


@pytest.mark.parametrize("policy_bot", [SLOW], indirect=True)
async def test_a_condition_that_runs_too_long_is_stopped_and_asks(
    policy_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = policy_bot
    await ask_for(bot, fake_slack, fake_model, CREATE)
    assert len(fake_slack.cards("C1")) == 1
    (decision,) = await decisions(bot)
    assert decision.reason is not None
    assert "could not be evaluated" in decision.reason  # stopped, not waited for


SHADOW = """\
version: 1
default: ask
rules:
  - name: would-deny
    tools: [create_task]
    outcome: deny
    reason: trying it out
    shadow: true
"""


@pytest.mark.parametrize("policy_bot", [SHADOW], indirect=True)
async def test_a_shadow_rule_is_recorded_but_not_enforced(
    policy_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = policy_bot
    shadowed = REGISTRY.get_sample_value(METRIC, {"outcome": "shadow"}) or 0.0
    await ask_for(bot, fake_slack, fake_model, CREATE)
    assert len(fake_slack.cards("C1")) == 1  # asked, not denied
    assert REGISTRY.get_sample_value(METRIC, {"outcome": "shadow"}) == shadowed + 1
    (decision,) = await decisions(bot)
    assert decision.outcome == "ask"
    assert decision.shadow == ["would-deny:deny"]
    (proposal,) = await proposals(bot)
    assert proposal.policy is not None
    assert proposal.policy["shadow"] == ["would-deny:deny"]


COUNTS = """\
version: 1
default: allow
rules:
  - name: one-per-thread
    tools: [create_task]
    when: calls_in_thread >= 1
    outcome: deny
    reason: one task per thread
  - name: three-a-day
    tools: [create_task]
    when: calls_today >= 3
    outcome: deny
    reason: three tasks a day
"""


@pytest.mark.parametrize("policy_bot", [COUNTS], indirect=True)
async def test_counts_of_calls_in_the_thread_and_today(
    policy_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = policy_bot
    thread_a = await ask_for(bot, fake_slack, fake_model, CREATE)  # allowed
    assert tool_results(fake_model)[-1]["status"] != "denied"
    await ask_for(bot, fake_slack, fake_model, CREATE)  # thread B, second today: allowed
    assert tool_results(fake_model)[-1]["status"] != "denied"
    await ask_for(bot, fake_slack, fake_model, CREATE, thread_ts=thread_a)  # thread A again
    assert tool_results(fake_model)[-1]["reason"].startswith("forbidden by policy: one task")
    await ask_for(bot, fake_slack, fake_model, CREATE)  # thread C, but the fourth call today
    assert tool_results(fake_model)[-1]["reason"].startswith("forbidden by policy: three")
    assert len(await tasks_in_db(bot)) == 2
    assert [(d.calls_in_thread, d.calls_today) for d in await decisions(bot)] == [
        (0, 0),
        (0, 1),
        (1, 2),
        (0, 3),
    ]


GROUPS = """\
version: 1
default: allow
rules:
  - name: interns-ask
    tools: [create_task]
    when: '"S0INTERNS" in groups'
    outcome: deny
    reason: interns ask a lead
"""


@pytest.mark.parametrize("policy_bot", [GROUPS], indirect=True)
async def test_the_requesters_user_groups_in_a_condition(
    policy_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = policy_bot
    fake_slack.user_groups["S0INTERNS"] = ["UIVY"]
    await ask_for(bot, fake_slack, fake_model, CREATE, user="UIVY")
    assert tool_results(fake_model)[-1]["status"] == "denied"
    await ask_for(bot, fake_slack, fake_model, CREATE, user="UALICE")
    assert tool_results(fake_model)[-1]["status"] != "denied"
    assert len(await tasks_in_db(bot)) == 1


READS = """\
version: 1
default: ask
rules:
  - name: reads-allowed-is-ignored
    tools: [list_tasks]
    outcome: allow
  - name: no-done-lists-here
    tools: [list_tasks]
    channels: [CBOTS]
    when: 'args.status == "any"'
    outcome: deny
    reason: the board is not read from this channel
  - name: quorum
    tools: [create_task]
    outcome: ask
    approvers: [UBOB, UCAT]
    approvals_required: 2
    timeout: 30m
"""


@pytest.mark.parametrize("policy_bot", [READS], indirect=True)
async def test_a_rule_may_deny_a_read_with_schema_defaults_applied(
    policy_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = policy_bot
    for channel in ("CBOTS", "C1"):
        fake_model.script(Script(tool_calls=[call("list_tasks", {})]), Script(text="ok"))
        await bot.mention(channel, "what is on the board", fake_slack)
        await bot.idle()
    answers = [
        r.body["messages"][-1]["content"]
        for r in fake_model.requests
        if r.body["messages"][-1]["role"] == "tool"
    ]
    assert len(answers) == 2
    in_bots, in_c1 = (json.loads(unwrapped(a)) for a in answers)
    assert in_bots == {
        "status": "denied",
        "reason": "forbidden by policy: the board is not read from this channel, do not retry",
    }
    assert in_c1.get("status") != "denied"  # C1: the read ran (an allow rule changes nothing)


@pytest.mark.parametrize("policy_bot", [READS], indirect=True)
async def test_an_ask_rule_sets_the_quorum_and_the_cards_timeout(
    policy_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = policy_bot
    await ask_for(bot, fake_slack, fake_model, CREATE)
    (card,) = fake_slack.cards("C1")
    (proposal,) = await proposals(bot)
    waits = (proposal.expires_at - proposal.created_at).total_seconds()
    assert 29 * 60 < waits <= 30 * 60 + 5
    await bot.click(card, cards.APPROVE, "UBOB", "C1")
    await bot.idle()
    assert await tasks_in_db(bot) == []
    assert "Approved by <@UBOB> (1 of 2)" in json.dumps(fake_slack.cards("C1")[0].blocks)
    await bot.click(card, cards.APPROVE, "UCAT", "C1")
    await bot.idle()
    assert len(await tasks_in_db(bot)) == 1


async def test_writes_the_policy_decides_keep_the_audit_chain_verifiable(
    policy_bot: RunningBot,
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    migrated_database_url: str,
    tmp_path: Path,
) -> None:
    """The policy's own paths (allow runs as approved by the rule, deny makes no proposal)
    write their audit rows into the same chain as people's decisions: `audit verify` holds
    (on the bot's own database: it used to verify a second, empty one)."""
    from tests.test_audit_chain import audit_cli

    await ask_for(policy_bot, fake_slack, fake_model, LOW)  # allowed by the rule
    await ask_for(policy_bot, fake_slack, fake_model, CREATE)  # asked: a card for Bob
    (card,) = fake_slack.cards("C1")
    assert await policy_bot.click(card, cards.APPROVE, "UBOB", "C1") == 200
    await policy_bot.idle()
    events = [a.event for a in await audit(policy_bot)]
    assert events.count("approve") == 2
    verified = audit_cli("verify", migrated_database_url, tmp_path)
    assert verified.returncode == 0, verified.stdout + verified.stderr


async def test_a_default_policy_file_created_after_start_is_in_force_within_5_s(
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    sqlite_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No POLICY_FILE and no policy.yaml at start: every write asks. Creating policy.yaml in
    the working directory puts it in force without a restart."""
    monkeypatch.chdir(tmp_path)
    bot = await start_bot(make_settings(fake_slack, fake_model, sqlite_url))
    try:
        await ask_for(bot, fake_slack, fake_model, LOW)
        (card,) = fake_slack.cards("C1")  # no file: the default asks
        assert await bot.click(card, cards.APPROVE, "UALICE", "C1") == 200
        await bot.idle()
        (tmp_path / "policy.yaml").write_text(POLICY)
        started = time.monotonic()
        source = bot.countersign.policy
        assert source is not None
        while source.current.version.startswith("env@"):
            assert time.monotonic() - started < 5, "the new file was not in force within 5 s"
            await asyncio.sleep(0.1)
        await ask_for(bot, fake_slack, fake_model, LOW, channel="C2")
        assert fake_slack.cards("C2") == []  # allowed by the file's rule
        assert len(await tasks_in_db(bot)) == 2
    finally:
        await stop_bot(bot)
