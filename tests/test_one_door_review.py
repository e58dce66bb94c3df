"""A security review of the one door (bot/policy/one_door.py), attacking it as a hostile
teammate, a prompt-injected model, a crashing process or a misbehaving Slack would: each test
is a hole it found (each failed before its fix). An Edit restarts the ladder's clock;
unreadable user groups refuse the call for now instead of guessing a more lenient rule; a
Slack failure at a click neither reroutes the card nor voids its votes."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import select

from bot.db.models import ProposalApproval, ProposalState
from bot.slack import cards
from tests.fakes.openai import FakeOpenAI
from tests.fakes.slack import FakeSlack, wait_until
from tests.harness import RunningBot
from tests.test_approvals_flow import proposals, tasks_in_db, tool_results
from tests.test_one_door import LENIENT, NORMAL, door_bot, edit
from tests.test_policy import ask_for

__all__ = ["door_bot"]  # the fixture, used below by name


# Carol alone approves; nobody answering for 3 s lets it run (the ladder's allow step).
CAROL_LADDER = LENIENT.replace(
    "    approvers: [UALICE, UBOB]\n    grants: [once, thread, channel, me]\n",
    "    approvers: [UCAROL]\n    escalate:\n      - after: 3s\n        outcome: allow\n",
)


@pytest.mark.parametrize("door_bot", [CAROL_LADDER], indirect=True)
async def test_an_edit_just_before_the_ladder_allows_is_not_run_unseen(
    door_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """The requester rewrites the card a moment before the ladder's allow step is due. The
    Edit "restarts the ladder" (escalation_step = 0), but the ladder's clock still counts from
    the proposal's creation (escalate_due and the door's _ladder_allows both read
    created_at), so the new revision, which Carol had under a second to see, is approved by
    "escalation" at the next sweep and run. Expected: the edited revision waits its full
    ladder (3 s from the edit) before the allow step may approve it."""
    bot = door_bot
    await ask_for(bot, fake_slack, fake_model, NORMAL)
    (card,) = fake_slack.cards("C1")
    await asyncio.sleep(2.0)  # Carol has seen revision 1 for 2 s of its 3 s
    assert await bot.click(card, cards.EDIT, "UALICE", "C1") == 200
    await bot.idle()
    status, answer = await edit(bot, fake_slack, "UALICE", title="Wipe the prod board")
    assert status == 200, answer
    await bot.idle()
    (proposal,) = await proposals(bot)
    assert proposal.revision == 2
    assert proposal.escalation_step == 0  # "the ladder starts again"
    await asyncio.sleep(1.2)  # revision 2 is 1.2 s old: not due under its own ladder
    await bot.countersign.sweeper.sweep()  # one sweep, as every replica runs them
    await bot.idle()
    (proposal,) = await proposals(bot)
    titles = [t.title for t in await tasks_in_db(bot)]
    assert titles == [], (proposal.state, proposal.decided_by, titles)
    assert proposal.state == ProposalState.PROPOSED


# Alice is a contractor: her tasks need Carol and Dana; everyone else's, Alice or Bob.
CONTRACTORS = """\
version: 1
default: ask
rules:
  - name: contractors
    tools: [create_task]
    groups: [S0CONTRACT]
    outcome: ask
    approvers: [UCAROL, UDANA]
    approvals_required: 2
  - name: tasks
    tools: [create_task, update_task]
    outcome: ask
    approvers: [UALICE, UBOB]
"""


@pytest.mark.parametrize("door_bot", [CONTRACTORS], indirect=True)
async def test_unreadable_user_groups_do_not_lower_what_a_write_needs(
    door_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """Slack does not answer `usergroups.users.list` (an outage, a rate limit, or the app
    lacking `usergroups:read`). The door's "fail-closed" ask (OneDoor._decide) is decided
    with the requester in no group, so it picks the lenient `tasks` rule (Alice or Bob, one
    approval) instead of the `contractors` rule (Carol and Dana, two) that Alice's calls fall
    under; four-eyes only keeps Alice out. At the proposal, the click and the start of
    execution alike, so Bob's single click ran a contractor's write. Expected: while the
    groups cannot be read, nothing runs with less than the strictest rule that may apply:
    the call is refused for now (not guessed), and the model is told it may try again."""
    bot = door_bot
    fake_slack.user_groups["S0CONTRACT"] = ["UALICE"]
    fake_slack.fail_methods["usergroups.users.list"] = "ratelimited"
    await ask_for(bot, fake_slack, fake_model, NORMAL)
    # Nobody can tell which rule applies: refused for now, not guessed (no card to click).
    assert fake_slack.cards("C1") == []
    assert await proposals(bot) == []
    assert await tasks_in_db(bot) == []
    result = tool_results(fake_model)[-1]
    assert result["status"] == "error"  # not a denial the model should take as final
    assert "user groups" in result["error"]


@pytest.mark.parametrize("door_bot", [CONTRACTORS], indirect=True)
async def test_control_with_readable_groups_bob_alone_runs_nothing_of_a_contractor(
    door_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """The control for the test above (passes): with the groups readable, the same click
    is refused and nothing runs."""
    bot = door_bot
    fake_slack.user_groups["S0CONTRACT"] = ["UALICE"]
    await ask_for(bot, fake_slack, fake_model, NORMAL)
    (proposal,) = await proposals(bot)
    assert (proposal.policy or {})["rule"] == "contractors"
    (card,) = fake_slack.cards("C1")
    assert await bot.click(card, cards.APPROVE, "UBOB", "C1") == 200
    await bot.idle()
    assert await tasks_in_db(bot) == []


TWO_OF_THREE = """\
version: 1
default: ask
rules:
  - name: leads-run-their-own
    tools: [create_task]
    groups: [S0LEADS]
    outcome: allow
  - name: tasks
    tools: [create_task]
    outcome: ask
    approvers: [UBOB, UCAROL, UDANA]
    approvals_required: 2
"""


@pytest.mark.parametrize("door_bot", [TWO_OF_THREE], indirect=True)
async def test_a_slack_hiccup_at_a_click_does_not_void_the_votes_cast(
    door_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """Bob approves (1 of 2). Later (the 30 s group cache has lapsed: cleared here) Slack
    answers `ratelimited` to `usergroups.users.list` during one click. Carol's click meets
    a fail-closed ask whose record differs from the card's (four_eyes, failed_closed), so
    DoorAtClicks.judge reroutes the card as if the policy had changed: Bob's vote is
    deleted (Carol is told "1 of 2") and the card's recorded ruling stays fail-closed
    (four-eyes, no grants) after Slack answers again. Expected: a transient failure refuses
    or counts the click but leaves the votes already cast and the card's routing."""
    bot = door_bot
    fake_slack.user_groups["S0LEADS"] = ["UZED"]
    await ask_for(bot, fake_slack, fake_model, NORMAL)
    await wait_until(lambda: bool(fake_slack.cards("C1")), timeout=10)  # a loaded machine
    (card,) = fake_slack.cards("C1")
    assert await bot.click(card, cards.APPROVE, "UBOB", "C1") == 200
    await bot.idle()
    door = bot.countersign.approvals.door
    assert door is not None
    door.groups._cache.clear()  # type: ignore[attr-defined]  # 30 s later
    fake_slack.fail_methods["usergroups.users.list"] = "ratelimited"  # during one click
    assert await bot.click(card, cards.APPROVE, "UCAROL", "C1") == 200
    await bot.idle()
    del fake_slack.fail_methods["usergroups.users.list"]
    (proposal,) = await proposals(bot)
    async with bot.countersign.db.transaction() as session:
        votes = list((await session.scalars(select(ProposalApproval.approver))).all())
    told = fake_slack.ephemerals_for("UCAROL")
    assert "UBOB" in votes, (votes, told, proposal.policy)
    assert (proposal.policy or {}).get("failed_closed") is not True, proposal.policy
