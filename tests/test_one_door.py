"""One door for every approval, through the front door: each finding of issue 25 that let a
write run past the policy in force, tried as a hostile teammate or a prompt-injected model
would. Each test fails on the code before the one door (bot/policy/one_door.py).

1. a grant covers only calls of the rule it was made on, unchanged, whose data its granter
   may read; 2. a deny whose condition cannot be evaluated denies, grant or not; 3. an Edit
   is decided again, and so is an escalation step that would run; 5. a click follows the
   policy in force (and so does the start of execution)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select

from bot.db.models import Grant, PolicyDecision, ProposalState, utcnow
from bot.policy.cli import check
from bot.policy.engine import Facts, decide
from bot.policy.model import load_text
from bot.policy.replay import compare
from bot.slack import cards
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack, wait_until
from tests.harness import RunningBot, make_settings, start_bot, stop_bot
from tests.test_approvals_flow import CREATE, call, proposals, tasks_in_db, tool_results
from tests.test_audience import SECRET, private_exec, read_exec
from tests.test_grants import ME, THREAD, grants_in_db
from tests.test_policy import ask_for

LENIENT = """\
version: 1
default: ask
rules:
  - name: no-urgent
    tools: [create_task]
    when: 'args.priority == "urgent"'
    outcome: deny
    reason: urgent work goes through the on-call lead
  - name: no-outside-assignees
    tools: [create_task]
    when: 'args.assignee.startsWith("UEXT")'
    outcome: deny
    reason: no outside assignees
  - name: big-tasks
    tools: [create_task]
    when: 'args.priority == "high"'
    outcome: ask
    approvers: [UCAROL, UDANA]
    approvals_required: 2
  - name: tasks
    tools: [create_task, update_task]
    outcome: ask
    approvers: [UALICE, UBOB]
    grants: [once, thread, channel, me]
"""
STRICTER = LENIENT.replace(
    "    approvers: [UALICE, UBOB]\n    grants: [once, thread, channel, me]\n",
    "    approvers: [UBOB, UCAROL]\n    four_eyes: true\n    grants: [once, thread, channel]\n",
)
OTHER_APPROVER = LENIENT.replace("approvers: [UALICE, UBOB]", "approvers: [UCAROL]")
DENY_ALL = LENIENT.replace(
    "  - name: big-tasks\n",
    "  - name: frozen\n    tools: [create_task]\n    outcome: deny\n"
    "    reason: the board is frozen\n  - name: big-tasks\n",
)
DM_ROUTED = LENIENT.replace(
    "    approvers: [UALICE, UBOB]\n", "    approvers: [UBOB]\n    route: dm\n"
)
NORMAL = {**CREATE, "priority": "normal"}


async def running(
    request: pytest.FixtureRequest, slack: FakeSlack, model: FakeOpenAI, url: str, folder: Path
) -> RunningBot:
    path = folder / "policy.yaml"
    path.write_text(getattr(request, "param", LENIENT))
    return await start_bot(make_settings(slack, model, url, policy_file=path, streaming="auto"))


@pytest.fixture
async def door_bot(
    request: pytest.FixtureRequest,
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    sqlite_url: str,
    tmp_path: Path,
) -> AsyncIterator[RunningBot]:
    """On SQLite: what these tests try is decided above the database."""
    bot = await running(request, fake_slack, fake_model, sqlite_url, tmp_path)
    yield bot
    await stop_bot(bot)


@pytest.fixture
async def both_bot(
    request: pytest.FixtureRequest,
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    migrated_database_url: str,
    tmp_path: Path,
) -> AsyncIterator[RunningBot]:
    """On SQLite and PostgreSQL: the claim's transaction and the reroutes' compare-and-set."""
    bot = await running(request, fake_slack, fake_model, migrated_database_url, tmp_path)
    yield bot
    await stop_bot(bot)


async def reload(bot: RunningBot, text: str, meet_waiting: bool = True) -> None:
    """Rewrite the policy file; `meet_waiting`: as the bot does after its poll (reroute and
    close what waits); else only put it in force, as a replica that has not yet done so."""
    source = bot.countersign.policy
    assert source is not None
    assert source.path is not None
    old = source.current.version
    source.path.write_text(text)
    if meet_waiting:
        assert await bot.countersign.reload_policy()
    else:
        assert source.refresh()
    assert source.current.version != old
    await bot.idle()


async def asks(
    bot: RunningBot,
    slack: FakeSlack,
    model: FakeOpenAI,
    thread: str | None = None,
    args: dict[str, object] | None = None,
) -> bool:
    """One more call by Alice in C1; True if it made a card (asked), False if it ran."""
    before = len(slack.cards("C1"))
    await ask_for(bot, slack, model, args or NORMAL, thread_ts=thread)
    return len(slack.cards("C1")) > before


async def propose(
    bot: RunningBot, slack: FakeSlack, model: FakeOpenAI, args: Mapping[str, object]
) -> None:
    """Alice asks in a new thread of C1; the model proposes `args` (its resume answers with
    the fake's default, so a card left waiting leaves no script behind for the next turn)."""
    model.script(Script(tool_calls=[call("create_task", dict(args))]))
    await bot.mention("C1", "track it", slack)
    await bot.idle()


async def edit(bot: RunningBot, slack: FakeSlack, user: str, **changes: str) -> tuple[int, str]:
    """Submit the Edit modal last opened, its fields as shown but for `changes` (pickers
    and menus send what they show unless changed)."""
    modal = slack.views[-1]["view"]
    return await bot.submit_view(modal, user, changes)


async def decisions_at(bot: RunningBot, step: str) -> list[PolicyDecision]:
    async with bot.countersign.db.transaction() as session:
        query = select(PolicyDecision).where(PolicyDecision.step == step)
        return list((await session.scalars(query.order_by(PolicyDecision.id))).all())


# -- 1. grants ---------------------------------------------------------------------------------


async def test_a_grant_covers_only_calls_its_own_rule_decides(
    door_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """Finding 1a: Alice's "Always for me" under the lenient rule does not approve a call a
    stricter rule sends to two other approvers."""
    bot = door_bot
    await ask_for(bot, fake_slack, fake_model, NORMAL)
    assert await bot.click(fake_slack.cards("C1")[-1], ME, "UALICE", "C1") == 200
    await bot.idle()
    (grant,) = await grants_in_db(bot)
    assert (grant.scope, grant.rule, grant.granted_by) == ("me", "tasks", "UALICE")
    assert grant.rule_hash
    assert grant.policy_version
    assert grant.audience
    assert not await asks(bot, fake_slack, fake_model)  # covered: the same rule decides

    before = len(fake_slack.cards("C1"))
    await ask_for(bot, fake_slack, fake_model, {**CREATE, "priority": "high"})
    assert len(fake_slack.cards("C1")) == before + 1  # a card, not the grant
    last = (await proposals(bot))[-1]
    assert last.state == ProposalState.PROPOSED
    assert last.decided_by is None
    assert (last.policy or {})["approvers"] == ["UCAROL", "UDANA"]
    assert len(await tasks_in_db(bot)) == 2


async def test_a_reload_that_changes_the_rule_voids_its_grants(
    door_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """Finding 1b: "Always for me" does not survive a reload adding four-eyes and another
    approver: the next call asks, and the grant is shown voided, with why."""
    bot = door_bot
    await ask_for(bot, fake_slack, fake_model, NORMAL)
    assert await bot.click(fake_slack.cards("C1")[-1], ME, "UALICE", "C1") == 200
    await bot.idle()
    await reload(bot, STRICTER)
    (grant,) = await grants_in_db(bot)
    assert grant.voided_at is not None
    assert "changed" in (grant.void_reason or "")
    assert await asks(bot, fake_slack, fake_model)  # a card again
    _, _, key = await bot.command(fake_slack, "/approvals", "grants", "UALICE")
    await wait_until(lambda: bool(fake_slack.answers(key)), timeout=10)
    shown = json.dumps(fake_slack.answers(key)[-1])
    assert "voided" in shown
    assert "changed" in shown


async def test_a_grant_does_not_cover_data_its_granter_may_not_read(
    door_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """Finding 1c: Bob's thread grant does not approve a write carrying #exec text, which Bob
    may not read (his own click on that card would be refused)."""
    bot = door_bot
    private_exec(fake_slack)
    thread = await ask_for(bot, fake_slack, fake_model, NORMAL)
    assert await bot.click(fake_slack.cards("C1")[-1], THREAD, "UBOB", "C1") == 200
    await bot.idle()
    (grant,) = await grants_in_db(bot)
    assert grant.granted_by == "UBOB"
    assert not await asks(bot, fake_slack, fake_model, thread=thread)  # covered as before
    fake_model.script(
        Script(tool_calls=[read_exec()]),
        Script(tool_calls=[call("create_task", NORMAL | {"description": SECRET}, "w9")]),
        Script(text="Tracked."),
    )
    await bot.mention("C1", "read GEXEC and track it", fake_slack, thread_ts=thread)
    await bot.idle()
    last = (await proposals(bot))[-1]
    assert last.arguments["description"] == SECRET
    assert last.state == ProposalState.PROPOSED  # waits for someone who may read it
    assert not str(last.decided_by or "").startswith("grant:")
    assert SECRET not in json.dumps([t.description for t in await tasks_in_db(bot)])


async def test_a_dm_thread_grant_covers_that_turn_only(
    door_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """A DM's timeline has no thread: "Approve for this thread" there ends with the turn."""
    bot = door_bot
    fake_model.script(Script(tool_calls=[call("create_task", NORMAL)]), Script(text="noted"))
    await bot.say(fake_slack, "DALICE", "track it")
    await bot.idle()
    (card,) = fake_slack.cards("DALICE")
    assert await bot.click(card, THREAD, "UALICE", "DALICE") == 200
    await bot.idle()
    (grant,) = await grants_in_db(bot)
    assert (grant.scope, grant.channel_id) == ("thread", "DALICE")
    assert (grant.thread_ts or "").startswith("turn:")
    fake_model.script(Script(tool_calls=[call("create_task", NORMAL)]), Script(text="noted"))
    await bot.say(fake_slack, "DALICE", "and another one")
    await bot.idle()
    assert len(fake_slack.cards("DALICE")) == 2  # a new turn: a card again
    assert len(await tasks_in_db(bot)) == 1


# -- 2. deny fails closed ------------------------------------------------------------------------


async def test_a_deny_that_cannot_be_evaluated_denies_even_under_a_grant(
    door_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """Finding 2: the model leaves out the field a deny rule reads; before, the decision
    became an ask, which the thread grant then approved with no card at all."""
    bot = door_bot
    thread = await ask_for(bot, fake_slack, fake_model, NORMAL)
    assert await bot.click(fake_slack.cards("C1")[-1], THREAD, "UBOB", "C1") == 200
    await bot.idle()
    cards_before = len(fake_slack.cards("C1"))
    no_assignee = {k: v for k, v in NORMAL.items() if k != "assignee"}
    await ask_for(bot, fake_slack, fake_model, no_assignee, thread_ts=thread)
    assert len(fake_slack.cards("C1")) == cards_before
    assert len(await tasks_in_db(bot)) == 1
    result = tool_results(fake_model)[-1]
    assert result["status"] == "denied"
    assert "could not be evaluated" in result["reason"]
    (denied,) = [d for d in await decisions_at(bot, "propose") if d.outcome == "deny"]
    assert denied.rule == "no-outside-assignees"


def test_arguments_too_big_to_evaluate_deny_where_a_deny_rule_reads_them() -> None:
    policy = load_text(LENIENT)
    huge = {"title": "x", "priority": "normal", "description": "y" * 250_000}
    made = decide(policy, "v", Facts("create_task", "tasks", huge, "C1", "UALICE"))
    assert made.outcome == "deny"
    assert "could not be evaluated" in (made.reason or "")


def test_a_fail_closed_ask_is_four_eyes_and_offers_no_grants() -> None:
    text = LENIENT.replace("when: 'args.priority == \"high\"'", "when: 'args.nope > 1'")
    text = text.replace("  - name: no-outside-assignees", "  - name: unused").replace(
        "args.assignee.startsWith", "args.title.startsWith"
    )
    made = decide(load_text(text), "v", Facts("create_task", "tasks", NORMAL, "C1", "UALICE"))
    assert (made.outcome, made.failed_closed) == ("ask", True)
    assert made.record()["failed_closed"] is True


# -- 3. an Edit, and the ladder, are decided again ------------------------------------------------


async def test_an_edit_to_a_denied_value_is_refused_and_the_card_keeps_its_revision(
    door_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = door_bot
    await ask_for(bot, fake_slack, fake_model, {**NORMAL, "priority": "low"})
    (card,) = fake_slack.cards("C1")
    await bot.click(card, cards.EDIT, "UALICE", "C1")
    await bot.idle()
    status, answer = await edit(bot, fake_slack, "UALICE", priority="urgent")
    assert status == 200
    errors = json.loads(answer)["errors"]
    assert any("on-call lead" in text for text in errors.values()), errors
    (proposal,) = await proposals(bot)
    assert (proposal.revision, proposal.arguments["priority"]) == (1, "low")
    assert await bot.click(fake_slack.cards("C1")[0], cards.APPROVE, "UBOB", "C1") == 200
    await bot.idle()
    (task,) = await tasks_in_db(bot)
    assert task.priority == "low"


async def test_an_edit_another_rule_asks_about_reroutes_the_card(
    door_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = door_bot
    await ask_for(bot, fake_slack, fake_model, NORMAL)
    (card,) = fake_slack.cards("C1")
    await bot.click(card, cards.EDIT, "UALICE", "C1")
    await bot.idle()
    status, answer = await edit(bot, fake_slack, "UALICE", priority="high")
    assert status == 200, answer
    await bot.idle()
    (proposal,) = await proposals(bot)
    assert proposal.revision == 2
    assert (proposal.policy or {})["rule"] == "big-tasks"
    assert (proposal.policy or {})["approvals_required"] == 2
    card = fake_slack.cards("C1")[0]
    assert await bot.click(card, cards.APPROVE, "UBOB", "C1") == 200  # the old rule's approver
    await bot.idle()
    assert await tasks_in_db(bot) == []
    assert any("not one of the approvers" in t for t in fake_slack.ephemerals_for("UBOB"))
    for person in ("UCAROL", "UDANA"):
        assert await bot.click(fake_slack.cards("C1")[0], cards.APPROVE, person, "C1") == 200
        await bot.idle()
    (task,) = await tasks_in_db(bot)
    assert task.priority == "high"
    edited = await decisions_at(bot, "edit")
    assert [(d.revision, d.rule) for d in edited] == [(2, "big-tasks")]
    # `policy replay` replays each decided revision: the first, and the edited one that ran.
    stricter = load_text(LENIENT.replace('args.priority == "urgent"', 'args.priority == "high"'))
    since = utcnow() - timedelta(hours=1)
    found = await compare(bot.countersign.db, stricter, "2@test", since)
    assert found.decisions == 2
    assert [line.split(":")[0] for line in found.approvals_denied] == ["proposal 1 revision 2"]


LADDER = LENIENT.replace(
    "    grants: [once, thread, channel, me]\n",
    "    grants: [once, thread, channel, me]\n    escalate:\n      - after: 1s\n"
    "        outcome: allow\n",
)


@pytest.mark.parametrize("door_bot", [LADDER], indirect=True)
async def test_an_escalation_allow_step_decides_the_revision_again(
    door_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = door_bot
    await ask_for(bot, fake_slack, fake_model, NORMAL)
    # The file now denies it; this replica has it in force but has not met what waits yet.
    await reload(bot, _with_ladder(DENY_ALL), meet_waiting=False)
    await asyncio.sleep(1.2)
    taken = await bot.countersign.approvals.escalate_due()
    assert taken == []
    await bot.idle()
    (proposal,) = await proposals(bot)
    assert proposal.state == ProposalState.DECLINED
    assert proposal.decided_by == "policy"
    assert "frozen" in (proposal.decline_reason or "")
    assert await tasks_in_db(bot) == []


def _with_ladder(text: str) -> str:
    return text.replace(
        "    grants: [once, thread, channel, me]\n",
        "    grants: [once, thread, channel, me]\n    escalate:\n      - after: 1s\n"
        "        outcome: allow\n",
    )


# -- 5. clicks, and the start of execution, follow the policy in force ---------------------------


@pytest.mark.parametrize("door_bot", [DM_ROUTED], indirect=True)
async def test_a_click_by_an_approver_the_reloaded_policy_removed_changes_nothing(
    door_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = door_bot
    await ask_for(bot, fake_slack, fake_model, NORMAL)
    (bobs,) = fake_slack.cards("DBOB")
    await reload(bot, DM_ROUTED.replace("approvers: [UBOB]", "approvers: [UCAROL]"), False)
    assert await bot.click(bobs, cards.APPROVE, "UBOB", "DBOB") == 200
    await bot.idle()
    assert await tasks_in_db(bot) == []
    assert any("not one of the approvers" in t for t in fake_slack.ephemerals_for("UBOB"))
    (proposal,) = await proposals(bot)
    assert proposal.state == ProposalState.PROPOSED
    assert (proposal.policy or {})["approvers"] == ["UCAROL"]  # rerouted by the click
    await wait_until(lambda: bool(fake_slack.cards("DCAROL")), timeout=10)
    (carols,) = fake_slack.cards("DCAROL")
    assert await bot.click(carols, cards.APPROVE, "UCAROL", "DCAROL") == 200
    await bot.idle()
    assert len(await tasks_in_db(bot)) == 1


@pytest.mark.parametrize("both_bot", [DM_ROUTED], indirect=True)
async def test_a_reload_reroutes_waiting_cards_and_closes_denied_ones(
    both_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = both_bot
    await propose(bot, fake_slack, fake_model, NORMAL)
    await propose(bot, fake_slack, fake_model, {**NORMAL, "title": "Second"})
    await reload(bot, DM_ROUTED.replace("approvers: [UBOB]", "approvers: [UCAROL]"))
    await wait_until(lambda: len(fake_slack.cards("DCAROL")) == 2, timeout=10)
    assert all(p.state == ProposalState.PROPOSED for p in await proposals(bot))
    assert any("approval policy changed" in m.text for m in fake_slack.bot_messages("C1"))
    for person, listed in (("UBOB", False), ("UCAROL", True)):  # /approvals follows it too
        _, _, key = await bot.command(fake_slack, "/approvals", "", person)
        await wait_until(lambda key=key: bool(fake_slack.answers(key)), timeout=10)
        answer = json.dumps(fake_slack.answers(key)[-1])
        assert ("Waiting for your decision" in answer and "Second" in answer) is listed
    await reload(bot, _frozen(DM_ROUTED.replace("approvers: [UBOB]", "approvers: [UCAROL]")))
    states = [p.state for p in await proposals(bot)]
    assert states == [ProposalState.DECLINED, ProposalState.DECLINED]
    assert all(r["status"] == "declined" for r in tool_results(fake_model)[-2:])
    assert await tasks_in_db(bot) == []


def _frozen(text: str) -> str:
    return text.replace(
        "  - name: big-tasks\n",
        "  - name: frozen\n    tools: [create_task]\n    outcome: deny\n"
        "    reason: the board is frozen\n  - name: big-tasks\n",
    )


async def test_the_start_of_execution_decides_exactly_the_approved_revision_again(
    both_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """An approval recorded a moment before a reload (no click path in between): the
    executor's own claim asks the door and runs nothing the policy in force forbids or
    whose votes no longer count."""
    bot = both_bot
    approvals, executor = bot.countersign.approvals, bot.countersign.executor
    await propose(bot, fake_slack, fake_model, NORMAL)
    await propose(bot, fake_slack, fake_model, {**NORMAL, "title": "Second"})
    first, second = await proposals(bot)
    await reload(bot, DENY_ALL, meet_waiting=False)
    await approvals.vote(first.id, first.revision, "UBOB", 1)
    assert (await executor.run(first.id)) is not None
    await reload(bot, OTHER_APPROVER, meet_waiting=False)
    await approvals.vote(second.id, second.revision, "UBOB", 1)  # Bob is no approver now
    assert (await executor.run(second.id)) is not None
    first, second = await proposals(bot)
    assert first.state == second.state == ProposalState.FAILED
    assert "forbids" in (first.error or "")
    assert "needs approvals" in (second.error or "")
    assert await tasks_in_db(bot) == []
    refused = await decisions_at(bot, "execute")
    assert [d.outcome for d in refused] == ["deny", "ask"]


async def test_grants_rows_keep_what_they_were_made_under(
    door_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = door_bot
    await ask_for(bot, fake_slack, fake_model, NORMAL)
    assert await bot.click(fake_slack.cards("C1")[-1], ME, "UBOB", "C1") == 200
    await bot.idle()
    async with bot.countersign.db.transaction() as session:
        grants = list((await session.scalars(select(Grant))).all())
    # "Always for me" is offered only where the requester may approve alone: Alice is an
    # approver, so Bob's click made one, bound to the rule and its requirements.
    (grant,) = grants
    assert (grant.approvers, grant.approvals_required, grant.four_eyes) == (
        ["UALICE", "UBOB"],
        1,
        False,
    )
    assert grant.audience == "C:C1"


def test_policy_check_warns_on_an_optional_argument_read_without_has(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(LENIENT)
    assert check(path) == 0
    out = capsys.readouterr().out
    assert "rule 'no-outside-assignees' reads args.assignee, which create_task may leave out" in out
    assert "has(args.assignee)" in out
    assert "reads args.priority" not in out  # left out, it reads as its default, "normal"
    guarded = LENIENT.replace(
        "'args.assignee.startsWith(\"UEXT\")'",
        "'has(args.assignee) && args.assignee != null && args.assignee.startsWith(\"UEXT\")'",
    )
    path.write_text(guarded)
    assert check(path) == 0
    assert "args.assignee" not in capsys.readouterr().out
    assert check(path, strict=True) == 0
