"""Routing cards to approvers and the escalation ladder, through the front door: `route: dm`
sends one card per approver (user groups expanded, never to whoever may not read what it
carries, never to the requester under four-eyes) and a note naming them in the thread; a
click is authorised again when it is clicked (someone dropped from the group meanwhile is
refused); `route: channel:…` posts to the approvers' channel only if everyone there may read
it; a ladder reminds, adds approvers, and ends with the policy's outcome, told to the model
as "nobody answered"."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from copy import deepcopy
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import delete, update

from bot.config import Settings
from bot.db.models import CardCopy, Proposal, ProposalState, utcnow
from bot.slack import cards
from tests.fakes.openai import FakeOpenAI
from tests.fakes.slack import BOT_USER_ID, FakeSlack, StoredMessage, wait_until
from tests.harness import RunningBot, make_settings, start_bot, stop_bot
from tests.test_approvals_flow import CREATE, audit, proposals, tasks_in_db, tool_results
from tests.test_policy import ask_for

RULE = """\
version: 1
default: ask
rules:
  - name: tasks
    tools: [create_task]
    outcome: ask
    approvers: [UBOB, S0LEADS]
    four_eyes: true
    route: {route}
{extra}"""

DM = RULE.format(route="dm", extra="")
LADDER = RULE.format(
    route="dm",
    extra="""    escalate:
      - after: 1s
      - after: 2s
        to: [UCAROL]
      - after: 3s
        outcome: {outcome}
""",
)


def sweeping(slack: FakeSlack, model: FakeOpenAI, url: str, policy: Path) -> Settings:
    """A bot with `policy` that sweeps every 0.1 s (the ladder's steps come quickly), on the
    default transport."""
    return make_settings(
        slack, model, url, policy_file=policy, sweep_interval_seconds=0.1, streaming="auto"
    )


@pytest.fixture
async def routed(
    request: pytest.FixtureRequest,
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    sqlite_url: str,
    tmp_path: Path,
) -> AsyncIterator[RunningBot]:
    path = tmp_path / "policy.yaml"
    path.write_text(getattr(request, "param", DM))
    fake_slack.user_groups["S0LEADS"] = ["UCAT", "UALICE"]
    settings = sweeping(fake_slack, fake_model, sqlite_url, path)
    running = await start_bot(settings)
    yield running
    await stop_bot(running)


def status(card: StoredMessage) -> str:
    return json.dumps(card.blocks)


def latest(slack: FakeSlack, channel: str) -> StoredMessage:
    """The card in `channel` as it shows now (edits included)."""
    (card,) = slack.cards(channel)
    return card


async def test_dm_route_sends_one_card_per_approver_and_names_them_in_the_thread(
    routed: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = routed
    await ask_for(bot, fake_slack, fake_model, CREATE)
    assert fake_slack.cards("C1") == []  # the card lives in the DMs
    assert [len(fake_slack.cards(d)) for d in ("DBOB", "DCAT")] == [1, 1]
    assert fake_slack.cards("DALICE") == []  # four-eyes: not to the requester
    notes = [m.text for m in fake_slack.bot_messages("C1") if "(notified" in m.text]
    assert notes == [
        ":hourglass_flowing_sand: Waiting for <@UBOB>, <@UCAT> (notified by direct message)."
    ]
    stale = deepcopy(latest(fake_slack, "DCAT"))
    assert await bot.click(latest(fake_slack, "DBOB"), cards.APPROVE, "UBOB", "DBOB") == 200
    await bot.idle()
    assert len(await tasks_in_db(bot)) == 1
    # The other approver's copy follows; a click on it changes nothing.
    await wait_until(lambda: "Done" in status(latest(fake_slack, "DCAT")), timeout=10)
    assert cards.APPROVE not in status(latest(fake_slack, "DCAT"))
    assert await bot.click(stale, cards.DECLINE, "UCAT", "DCAT") == 200
    await bot.idle()
    assert len(await tasks_in_db(bot)) == 1
    (proposal,) = await proposals(bot)
    assert (proposal.state, proposal.decided_by) == (ProposalState.SUCCEEDED, "UBOB")


async def test_a_click_by_someone_dropped_from_the_group_is_refused_at_click_time(
    routed: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = routed
    await ask_for(bot, fake_slack, fake_model, CREATE)
    card = latest(fake_slack, "DCAT")
    fake_slack.user_groups["S0LEADS"] = ["UALICE"]  # Cat left the group after the DM
    assert await bot.click(card, cards.APPROVE, "UCAT", "DCAT") == 200
    await bot.idle()
    assert await tasks_in_db(bot) == []
    (proposal,) = await proposals(bot)
    assert proposal.state == ProposalState.PROPOSED
    refused = [a for a in await audit(bot) if a.event == "refused"]
    assert [r.actor for r in refused] == ["UCAT"]
    assert any("not one of the approvers" in t for t in fake_slack.ephemerals_for("UCAT"))
    # Slack cannot say who is in the group: refused too (fail closed), not approved.
    fake_slack.user_groups["S0LEADS"] = ["UCAT"]
    fake_slack.fail_methods["usergroups.users.list"] = "internal_error"
    assert await bot.click(card, cards.APPROVE, "UCAT", "DCAT") == 200
    await bot.idle()
    assert await tasks_in_db(bot) == []
    del fake_slack.fail_methods["usergroups.users.list"]
    assert await bot.click(card, cards.APPROVE, "UCAT", "DCAT") == 200  # in again: counts
    await bot.idle()
    assert len(await tasks_in_db(bot)) == 1


async def test_nobody_is_sent_a_card_carrying_what_they_may_not_read(
    routed: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = routed
    fake_slack.channel_info["GSECRET"] = {"id": "GSECRET", "is_private": True}
    fake_slack.members["GSECRET"] = ["UALICE", "UBOB", BOT_USER_ID]  # Cat is not in it
    await ask_for(bot, fake_slack, fake_model, CREATE, channel="GSECRET")
    assert len(fake_slack.cards("DBOB")) == 1
    assert fake_slack.cards("DCAT") == []
    notes = [m.text for m in fake_slack.bot_messages("GSECRET") if "(notified" in m.text]
    assert notes == [":hourglass_flowing_sand: Waiting for <@UBOB> (notified by direct message)."]


@pytest.mark.parametrize("routed", [RULE.format(route="channel:CAPPROVE", extra="")], indirect=True)
async def test_channel_route_posts_to_the_approvers_channel_unless_it_may_not_read_it(
    routed: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = routed
    await ask_for(bot, fake_slack, fake_model, CREATE)
    assert fake_slack.cards("C1") == []
    card = latest(fake_slack, "CAPPROVE")
    assert any("(notified in <#CAPPROVE>)" in m.text for m in fake_slack.bot_messages("C1"))
    assert await bot.click(card, cards.APPROVE, "UBOB", "CAPPROVE") == 200
    await bot.idle()
    assert len(await tasks_in_db(bot)) == 1
    # From a private channel the approvers' channel may not read it: DMs instead.
    fake_slack.channel_info["GSECRET"] = {"id": "GSECRET", "is_private": True}
    fake_slack.members["GSECRET"] = ["UALICE", "UBOB", BOT_USER_ID]
    await ask_for(bot, fake_slack, fake_model, {**CREATE, "title": "x"}, channel="GSECRET")
    assert len(fake_slack.cards("CAPPROVE")) == 1
    assert len(fake_slack.cards("DBOB")) == 1


@pytest.mark.parametrize("routed", [RULE.format(route="thread", extra="")], indirect=True)
async def test_a_thread_card_goes_to_dms_when_no_approver_is_in_the_channel(
    routed: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = routed
    await ask_for(bot, fake_slack, fake_model, CREATE)  # Bob is in C1: the thread
    assert await bot.click(latest(fake_slack, "C1"), cards.APPROVE, "UBOB", "C1") == 200
    await bot.idle()  # the turn ends: the model's next answer is for the next mention
    fake_slack.members["C2"] = ["UALICE", BOT_USER_ID]
    await ask_for(bot, fake_slack, fake_model, {**CREATE, "title": "y"}, channel="C2")
    assert fake_slack.cards("C2") == []
    assert len(fake_slack.cards("DBOB")) == 1


@pytest.mark.parametrize("routed", [LADDER.format(outcome="deny")], indirect=True)
async def test_a_ladder_reminds_adds_approvers_and_ends_as_nobody_answered(
    routed: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = routed
    await ask_for(bot, fake_slack, fake_model, CREATE)
    bob_card = latest(fake_slack, "DBOB")
    assert await bot.click(bob_card, cards.APPROVE, "UCAROL", "DBOB") == 200  # not yet hers
    await bot.idle()
    await wait_until(
        lambda: any("Still waiting" in m.text for m in fake_slack.bot_messages("C1")), timeout=5
    )
    assert any("Still waiting" in m.text for m in fake_slack.thread("DBOB", bob_card.ts))
    await wait_until(lambda: len(fake_slack.cards("DCAROL")) == 1, timeout=5)
    await wait_until(
        lambda: any(
            "escalated" in m.text and "<@UCAROL>" in m.text for m in fake_slack.bot_messages("C1")
        ),
        timeout=5,
    )
    await wait_until(lambda: "Nobody answered" in status(latest(fake_slack, "DCAROL")), timeout=8)
    (proposal,) = await proposals(bot)
    assert (proposal.state, proposal.decided_by) == (ProposalState.EXPIRED, "escalation")
    assert await tasks_in_db(bot) == []
    events = [(a.event, a.actor) for a in await audit(bot) if a.actor == "escalation"]
    assert events == [
        ("remind", "escalation"),
        ("escalate", "escalation"),
        ("escalate_deny", "escalation"),
    ]
    await wait_until(lambda: len(fake_model.requests) >= 2, timeout=5)  # the turn resumed
    await bot.idle()
    (told,) = tool_results(fake_model)
    assert told["status"] == "nobody_answered"
    assert "declin" not in json.dumps(told).replace("Nobody declined", "")


@pytest.mark.parametrize("routed", [LADDER.format(outcome="allow")], indirect=True)
async def test_a_person_the_ladder_adds_may_approve_and_an_allow_ends_it_by_running(
    routed: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = routed
    await ask_for(bot, fake_slack, fake_model, CREATE)
    await wait_until(lambda: len(fake_slack.cards("DCAROL")) == 1, timeout=5)
    assert await bot.click(latest(fake_slack, "DCAROL"), cards.APPROVE, "UCAROL", "DCAROL") == 200
    await bot.idle()
    (proposal,) = await proposals(bot)
    assert (proposal.state, proposal.decided_by) == (ProposalState.SUCCEEDED, "UCAROL")
    # The same ladder, nobody answering: the terminal allow runs it, once.
    await ask_for(bot, fake_slack, fake_model, {**CREATE, "title": "z"})
    await wait_until(lambda: "Done" in status(fake_slack.cards("DBOB")[-1]), timeout=8)
    await bot.idle()
    assert len(await tasks_in_db(bot)) == 2
    last = (await proposals(bot))[-1]
    assert (last.state, last.decided_by) == (ProposalState.SUCCEEDED, "escalation")


async def test_a_poster_taking_over_finds_the_copies_already_sent_and_sends_no_second(
    routed: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """A poster died after its DMs went out but before it recorded them: the next one finds
    them by the key in their metadata."""
    bot = routed
    await ask_for(bot, fake_slack, fake_model, CREATE)
    async with bot.countersign.db.transaction() as session:
        await session.execute(delete(CardCopy))
        await session.execute(
            update(Proposal).values(card_channel="", card_ts=None, card_claimed_until=None)
        )
    (proposal,) = await proposals(bot)
    assert await bot.countersign.sweeper.cards.post(proposal)
    assert [len(fake_slack.cards(d)) for d in ("DBOB", "DCAT")] == [1, 1]
    copies = await bot.countersign.approvals.copies_of(proposal.id)
    assert sorted(c.recipient for c in copies) == ["UBOB", "UCAT"]
    assert await bot.click(latest(fake_slack, "DCAT"), cards.APPROVE, "UCAT", "DCAT") == 200
    await bot.idle()
    await wait_until(lambda: "Done" in status(latest(fake_slack, "DBOB")), timeout=10)


async def test_the_expiry_reminder_of_a_routed_card_goes_under_each_copy(
    routed: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = routed
    await ask_for(bot, fake_slack, fake_model, CREATE)
    async with bot.countersign.db.transaction() as session:
        await session.execute(update(Proposal).values(expires_at=utcnow() + timedelta(minutes=2)))
    await bot.countersign.sweeper.sweep()
    for dm in ("DBOB", "DCAT"):
        card = latest(fake_slack, dm)
        assert any("Expires" in m.text for m in fake_slack.thread(dm, card.ts)), dm
    assert not any("<@UALICE>, an action waits" in m.text for m in fake_slack.bot_messages("DBOB"))


SELF = """\
version: 1
default: ask
rules:
  - name: tasks
    tools: [create_task]
    outcome: ask
    escalate:
      - after: 1s
        to: [UCAROL]
"""


@pytest.mark.parametrize("routed", [SELF], indirect=True)
async def test_a_ladder_adding_approvers_leaves_a_self_approving_requester_able_to_decide(
    routed: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = routed
    await ask_for(bot, fake_slack, fake_model, CREATE)
    card = latest(fake_slack, "C1")  # the requester decides: the card is in the thread
    await wait_until(lambda: len(fake_slack.cards("DCAROL")) == 1, timeout=5)
    assert await bot.click(card, cards.APPROVE, "UALICE", "C1") == 200
    await bot.idle()
    (proposal,) = await proposals(bot)
    assert (proposal.state, proposal.decided_by) == (ProposalState.SUCCEEDED, "UALICE")


async def test_two_replicas_climb_each_step_once(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, tmp_path: Path
) -> None:
    """Two bots on one database, both sweeping every 0.1 s: every step of the ladder is taken
    once (one audit row, one card for the person it adds), whichever gets there first."""
    path = tmp_path / "policy.yaml"
    path.write_text(LADDER.format(outcome="deny"))
    fake_slack.user_groups["S0LEADS"] = ["UCAT", "UALICE"]
    settings = sweeping(fake_slack, fake_model, sqlite_url, path)
    first, second = await start_bot(settings), await start_bot(settings)
    try:
        await ask_for(first, fake_slack, fake_model, CREATE)
        await wait_until(lambda: "Nobody answered" in status(latest(fake_slack, "DBOB")), 10)
        await first.idle()
        events = [a.event for a in await audit(first) if a.actor == "escalation"]
        assert events == ["remind", "escalate", "escalate_deny"]
        assert len(fake_slack.cards("DCAROL")) == 1
        reminders = [m for m in fake_slack.bot_messages("C1") if "Still waiting" in m.text]
        assert len(reminders) == 1
    finally:
        await stop_bot(second)
        await stop_bot(first)


async def test_an_approver_slack_will_not_reach_is_left_out_and_the_others_still_decide(
    routed: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """Cat's account was deactivated: Slack refuses her DM. Bob still gets his card, the
    thread names only who was told, and Bob's click decides; nothing stops on her."""
    bot = routed
    fake_slack.disabled_users.add("UCAT")
    await ask_for(bot, fake_slack, fake_model, CREATE)
    assert len(fake_slack.cards("DBOB")) == 1
    assert fake_slack.cards("DCAT") == []
    notes = [m.text for m in fake_slack.bot_messages("C1") if "(notified" in m.text]
    assert notes == [":hourglass_flowing_sand: Waiting for <@UBOB> (notified by direct message)."]
    assert await bot.click(latest(fake_slack, "DBOB"), cards.APPROVE, "UBOB", "DBOB") == 200
    await bot.idle()
    assert len(await tasks_in_db(bot)) == 1


async def test_when_slack_reaches_no_approver_the_card_waits_and_is_sent_once_it_can(
    routed: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """No DM could be opened. The card is not moved into the thread (its members may not be
    meant to read it) and the proposal is not lost: it waits, and the sweeper sends the DMs
    once Slack takes them, once each."""
    bot = routed
    fake_slack.disabled_users.update({"UBOB", "UCAT"})
    await ask_for(bot, fake_slack, fake_model, CREATE)
    assert fake_slack.cards("C1") == []
    (proposal,) = await proposals(bot)
    assert proposal.state == ProposalState.PROPOSED
    fake_slack.disabled_users.clear()
    await wait_until(
        lambda: [len(fake_slack.cards(d)) for d in ("DBOB", "DCAT")] == [1, 1], timeout=10
    )
    assert await bot.click(latest(fake_slack, "DBOB"), cards.APPROVE, "UBOB", "DBOB") == 200
    await bot.idle()
    assert len(await tasks_in_db(bot)) == 1
    assert [len(fake_slack.cards(d)) for d in ("DBOB", "DCAT")] == [1, 1]
