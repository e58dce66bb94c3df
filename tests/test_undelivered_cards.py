"""A card Slack will not deliver is said, not silently lost, through the front door: the
requester is told in the thread, in words and without ids or error codes, that the card did
not reach its approver(s) and where it still waits (the App Home and `/approvals` list it);
approvers who got it are unaffected; a failure the Slack client's retries cure says nothing;
a permanent one is said once, however often the sweeper (on any replica) tries again."""

from __future__ import annotations

import asyncio
import json
import re
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import update

from bot.db.models import Proposal, ProposalState, utcnow
from bot.slack import cards
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack, manifest_scopes, wait_until
from tests.harness import RunningBot, make_settings, start_bot, stop_bot
from tests.test_approvals_flow import CREATE, call, proposals, tasks_in_db
from tests.test_audience import SECRET, private_exec, read_exec
from tests.test_policy import ask_for
from tests.test_records import answer, text_of
from tests.test_routing import DM, LADDER, latest, routed, sweeping

__all__ = ["routed"]  # the fixture, shared with test_routing

NOT_SENT = re.compile(r"the approval card .*could not be (sent|posted)")


def misses(slack: FakeSlack, channel: str = "C1") -> list[str]:
    """The bot's notes in `channel` saying a card did not arrive."""
    return [m.text for m in slack.bot_messages(channel) if NOT_SENT.search(m.text)]


def assert_reads_as_words(note: str) -> None:
    """No error code, scope name or bare id: only mentions (which Slack shows as names)."""
    without_mentions = re.sub(r"<@U[A-Z0-9]+>", "", note)
    assert not re.search(r"\b[UWCGD][A-Z0-9]{3,}\b", without_mentions), note
    assert not re.search(r"missing_scope|user_not_found|im:write|http_", note), note
    assert "<!" not in note  # never pings a channel
    assert "countersign doctor" in note
    assert "App Home" in note
    assert "/approvals" in note


async def listed_for(bot: RunningBot, slack: FakeSlack, user: str) -> str:
    _, _, key = await bot.command(slack, "/approvals", "", user)
    return text_of((await answer(bot, slack, key))["blocks"])


async def test_a_bot_without_im_write_tells_the_requester_once_that_no_approver_got_the_card(
    routed: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """Routed by DM to Bob and Cat, but the token lacks `im:write`: the thread is told once
    (naming both, why in words, what to do) however often the sweeper tries again, and the
    action still waits in Bob's `/approvals`."""
    bot = routed
    fake_slack.scopes = manifest_scopes() - {"im:write"}
    await ask_for(bot, fake_slack, fake_model, CREATE)
    (note,) = misses(fake_slack)
    assert note.startswith(":warning: <@UALICE>, the approval card could not be sent to ")
    assert "<@UBOB> and <@UCAT> (Countersign lacks a Slack permission" in note
    assert_reads_as_words(note)
    assert not [m for m in fake_slack.bot_messages("C1") if "(notified" in m.text]
    tries = len(fake_slack.calls_to("conversations.open"))
    await wait_until(lambda: len(fake_slack.calls_to("conversations.open")) >= tries + 4, 10)
    await bot.idle()
    assert len(misses(fake_slack)) == 1  # the sweeper tried again: said once
    (proposal,) = await proposals(bot)
    assert proposal.state == ProposalState.PROPOSED
    assert "Create task" in await listed_for(bot, fake_slack, "UBOB")
    home = {"type": "app_home_opened", "user": "UBOB", "channel": "DUBOB", "tab": "home"}
    assert await bot.send_event(home) == 200
    await wait_until(
        lambda: any(
            p.get("user_id") == "UBOB" and "Create task" in json.dumps(p)
            for p in fake_slack.published
        ),
        timeout=5,
    )
    # Once the scope is granted, the sweeper delivers the cards, and nothing more is said.
    fake_slack.scopes = manifest_scopes()
    await wait_until(
        lambda: [len(fake_slack.cards(d)) for d in ("DBOB", "DCAT")] == [1, 1], timeout=10
    )
    await bot.idle()
    assert len(misses(fake_slack)) == 1


async def test_an_approver_slack_cannot_find_is_named_and_the_other_still_decides(
    routed: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = routed
    fake_slack.unknown_users.add("UCAT")
    await ask_for(bot, fake_slack, fake_model, CREATE)
    assert len(fake_slack.cards("DBOB")) == 1
    assert fake_slack.cards("DCAT") == []
    waiting = [m.text for m in fake_slack.bot_messages("C1") if "(notified" in m.text]
    assert waiting == [":hourglass_flowing_sand: Waiting for <@UBOB> (notified by direct message)."]
    (note,) = misses(fake_slack)
    assert "could not be sent to <@UCAT> (Slack cannot find that account)" in note
    assert "<@UBOB>" not in note
    assert_reads_as_words(note)
    # Where it waits: each approver's list links to the card they can open, none to
    # another person's DM (which would open nothing).
    for_cat = await listed_for(bot, fake_slack, "UCAT")
    assert "Create task" in for_cat
    assert "archives/D" not in for_cat
    assert "archives/DBOB/" in await listed_for(bot, fake_slack, "UBOB")
    assert await bot.click(latest(fake_slack, "DBOB"), cards.APPROVE, "UBOB", "DBOB") == 200
    await bot.idle()
    assert len(await tasks_in_db(bot)) == 1
    assert len(misses(fake_slack)) == 1


async def test_a_server_error_the_client_retries_away_says_nothing(
    routed: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = routed
    fake_slack.server_errors["conversations.open"] = 2
    await ask_for(bot, fake_slack, fake_model, CREATE)
    assert [len(fake_slack.cards(d)) for d in ("DBOB", "DCAT")] == [1, 1]
    assert [c.status for c in fake_slack.calls_to("conversations.open")].count(500) == 2
    assert misses(fake_slack) == []
    (waiting,) = [m.text for m in fake_slack.bot_messages("C1") if "(notified" in m.text]
    assert "<@UBOB>" in waiting  # in the order their DMs answered
    assert "<@UCAT>" in waiting


async def test_a_private_card_the_requester_cannot_be_sent_is_said_without_its_secret(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """The card carries a private channel's text, so it goes to the requester alone; without
    `im:write` it cannot: the thread says so (not what it carries)."""
    fake_slack.scopes = manifest_scopes() - {"im:write"}
    private_exec(fake_slack)
    fake_model.script(
        Script(tool_calls=[read_exec()]),
        Script(tool_calls=[call("create_task", CREATE | {"description": SECRET}, "w1")]),
        Script(text="Tracked."),
    )
    await bot.mention("C1", "read GEXEC and track what it says", fake_slack)
    await bot.idle()
    (note,) = misses(fake_slack)
    assert "was meant for you alone, by direct message, and could not be sent" in note
    assert_reads_as_words(note)
    public = json.dumps([(m.text, m.blocks) for m in fake_slack.channels["C1"]])
    assert SECRET not in public
    assert "went to <@UALICE> privately" not in public  # it did not


async def test_approvers_are_counted_not_named_where_the_thread_may_not_read_the_action(
    routed: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """Who may approve an action drawn from a private channel says who is in it: the
    public thread hears how many approvers the card missed, not who."""
    bot = routed
    private_exec(fake_slack)
    fake_slack.members["GEXEC"] = ["UALICE", "UBOB", "UCAT", "UBOT"]
    fake_slack.unknown_users.add("UCAT")
    fake_model.script(
        Script(tool_calls=[read_exec()]),
        Script(tool_calls=[call("create_task", CREATE | {"description": SECRET}, "w1")]),
        Script(text="Tracked."),
    )
    await bot.mention("C1", "read GEXEC and track what it says", fake_slack)
    await bot.idle()
    assert len(fake_slack.cards("DBOB")) == 1
    (note,) = misses(fake_slack)
    assert "could not be sent to 1 approver (Slack cannot find that account)" in note
    assert "<@UCAT>" not in note
    assert SECRET not in note


async def test_two_replicas_say_a_missed_card_once(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, tmp_path: Path
) -> None:
    """Both bots sweep every 0.1 s and both try the undeliverable card again: one note."""
    path = tmp_path / "policy.yaml"
    path.write_text(DM)
    fake_slack.user_groups["S0LEADS"] = ["UCAT", "UALICE"]
    fake_slack.scopes = manifest_scopes() - {"im:write"}
    settings = sweeping(fake_slack, fake_model, sqlite_url, path)
    first, second = await start_bot(settings), await start_bot(settings)
    try:
        await ask_for(first, fake_slack, fake_model, CREATE)
        await asyncio.sleep(1.0)
        await first.idle()
        await second.idle()
        assert len(misses(fake_slack)) == 1
    finally:
        await stop_bot(second)
        await stop_bot(first)


CHANNEL_RULE = DM.replace("route: dm", "route: channel:CAPPROVERS")


@pytest.mark.parametrize("routed", [CHANNEL_RULE], indirect=True)
async def test_an_archived_approvers_channel_is_said_in_the_thread(
    routed: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = routed
    fake_slack.channel_info["CAPPROVERS"] = {"id": "CAPPROVERS", "name": "approvers"}
    fake_slack.archived.add("CAPPROVERS")
    await ask_for(bot, fake_slack, fake_model, CREATE)
    assert fake_slack.cards("CAPPROVERS") == []
    (note,) = misses(fake_slack)
    assert "could not be posted in the approvers' channel (that channel is archived)" in note
    assert_reads_as_words(note)
    (proposal,) = await proposals(bot)
    assert proposal.state == ProposalState.PROPOSED


@pytest.mark.parametrize("routed", [LADDER.format(outcome="deny")], indirect=True)
async def test_an_escalation_to_someone_slack_cannot_reach_is_said_not_claimed(
    routed: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """The ladder adds Carol, whose account Slack cannot find: the thread is not told she was
    notified; it is told, once, that the card did not reach her."""
    bot = routed
    fake_slack.unknown_users.add("UCAROL")
    await ask_for(bot, fake_slack, fake_model, CREATE)
    await wait_until(lambda: any("<@UCAROL>" in n for n in misses(fake_slack)), timeout=10)
    await wait_until(lambda: "Nobody answered" in json.dumps(latest(fake_slack, "DBOB").blocks), 10)
    await bot.idle()
    (note,) = misses(fake_slack)
    assert "could not be sent to <@UCAROL> (Slack cannot find that account)" in note
    claimed = [m.text for m in fake_slack.bot_messages("C1") if "escalated" in m.text]
    assert not [t for t in claimed if "<@UCAROL>" in t]
    assert fake_slack.cards("DCAROL") == []


async def test_a_thread_archived_meanwhile_is_said_to_the_requester_by_dm(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """The channel was archived while the model worked: neither the answer nor the card can
    go there, so the requester hears it in their DM with the bot."""
    fake_model.script(
        Script(tool_calls=[call("create_task", CREATE)], time_to_first_token=1.0),
        Script(text="noted"),
    )
    asking = asyncio.create_task(bot.mention("C1", "track it", fake_slack))
    await wait_until(lambda: len(fake_model.requests) == 1, timeout=5)
    fake_slack.archived.add("C1")
    await asking
    await bot.idle()
    assert fake_slack.cards("C1") == []
    (note,) = misses(fake_slack, "DALICE")
    assert "could not be posted in its thread in <#C1> (that channel is archived)" in note
    assert_reads_as_words(note)


async def test_a_refusal_the_sweeper_cures_says_nothing(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    bot = await start_bot(
        make_settings(
            fake_slack, fake_model, sqlite_url, sweep_interval_seconds=0.1, streaming="auto"
        )
    )
    try:
        fake_slack.refuse_cards = 1  # Slack's internal_error, once: the sweeper posts it
        await ask_for(bot, fake_slack, fake_model, CREATE)
        await wait_until(lambda: len(fake_slack.cards("C1")) == 1, timeout=20)
        await bot.idle()
        assert misses(fake_slack) == []
        assert misses(fake_slack, "DALICE") == []
    finally:
        await stop_bot(bot)


async def test_an_outage_that_lasts_is_said_once(
    routed: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """Slack answers 500 to every DM, past the client's retries: the sweeper keeps trying
    and says nothing at first (it may pass); once the card has waited long, the thread is told
    once."""
    bot = routed
    fake_slack.server_errors["conversations.open"] = 10_000
    await ask_for(bot, fake_slack, fake_model, CREATE)
    tries = len(fake_slack.calls_to("conversations.open"))
    await wait_until(lambda: len(fake_slack.calls_to("conversations.open")) > tries, 10)
    assert misses(fake_slack) == []
    async with bot.countersign.db.transaction() as session:
        await session.execute(update(Proposal).values(created_at=utcnow() - timedelta(minutes=3)))
    await wait_until(lambda: len(misses(fake_slack)) == 1, timeout=10)
    tries = len(fake_slack.calls_to("conversations.open"))
    await wait_until(lambda: len(fake_slack.calls_to("conversations.open")) > tries + 3, 10)
    (note,) = misses(fake_slack)
    assert "<@UBOB> and <@UCAT> (Slack did not answer in time)" in note
    fake_slack.server_errors.clear()
