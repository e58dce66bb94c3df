"""The App Home as a person's record: sections (waiting for you, with a link to the card and a
Decline button; your recent work; grants), pages of recent work turned by authorised buttons,
and nothing of a conversation shown to somebody who could not read it in Slack."""

from __future__ import annotations

import json
import time
from typing import Any

from sqlalchemy import select

from bot.db.models import Proposal, ProposalState
from bot.slack import cards
from bot.slack.home_view import HOME_PAGE, OPEN_CARD
from tests.fakes import slack as fake
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack, wait_until
from tests.harness import RunningBot, make_settings, start_bot, stop_bot
from tests.test_approvals_flow import CREATE, call
from tests.test_records import looks_like_json, seed, texts


async def open_home(bot: RunningBot, slack: FakeSlack, user: str) -> dict[str, Any]:
    published = len(slack.published)
    event = {"type": "app_home_opened", "user": user, "channel": "D1", "tab": "home"}
    assert await bot.send_event(event) == 200
    await wait_until(lambda: len(slack.published) > published, timeout=10)
    await bot.idle()
    home = slack.home_of(user)
    assert home is not None
    return home


async def press_home(bot: RunningBot, user: str, action_id: str, value: str) -> int:
    """A button of the Home tab, as Slack sends it: a view container, no channel."""
    status, _ = await bot._interact(
        {
            "type": "block_actions",
            "user": {"id": user, "team_id": fake.TEAM_ID},
            "trigger_id": f"trigger-home-{time.monotonic_ns()}",
            "container": {"type": "view", "view_id": "VHOME"},
            "view": {"id": "VHOME", "type": "home"},
            "actions": [
                {
                    "type": "button",
                    "action_id": action_id,
                    "block_id": "b",
                    "value": value,
                    "action_ts": "1.0",
                }
            ],
        }
    )
    return status


def button(home: dict[str, Any], action_id: str) -> dict[str, Any]:
    return next(
        e
        for b in home["blocks"]
        if b["type"] == "actions"
        for e in b["elements"]
        if e["action_id"] == action_id
    )


def headers(home: dict[str, Any]) -> list[str]:
    return [b["text"]["text"] for b in home["blocks"] if b["type"] == "header"]


async def test_the_home_is_in_sections_and_pages_through_recent_work(
    bot: RunningBot, fake_slack: FakeSlack
) -> None:
    await seed(bot, "UALICE", 12)
    home = await open_home(bot, fake_slack, "UALICE")
    assert headers(home) == ["Waiting for you", "Your recent work", "Your usage", "Grants"]
    shown = json.dumps(home)
    assert "Deploy plan 11" in shown  # newest first, by title
    assert "|Deploy plan 2>" in shown
    assert "|Deploy plan 1>" not in shown  # on the next page
    assert "{date_pretty} at {time}" in shown
    assert not any(looks_like_json(t) for t in texts(home["blocks"]))
    nxt = button(home, f"{HOME_PAGE}_next")

    published = len(fake_slack.published)
    assert await press_home(bot, "UALICE", nxt["action_id"], nxt["value"]) == 200
    await wait_until(lambda: len(fake_slack.published) > published, timeout=10)
    await bot.idle()
    second = fake_slack.home_of("UALICE")
    assert second is not None
    assert "Deploy plan 0" in json.dumps(second)
    assert "Deploy plan 11" not in json.dumps(second)
    prev = button(second, f"{HOME_PAGE}_prev")
    assert json.loads(prev["value"])["page"] == 0

    # A crafted page changes nothing; Bob's click pages Bob's own Home, never Alice's.
    published = len(fake_slack.published)
    assert await press_home(bot, "UALICE", f"{HOME_PAGE}_next", '{"page": "x"}') == 200
    assert await press_home(bot, "UALICE", f"{HOME_PAGE}_next", "not json") == 200
    await bot.idle()
    assert len(fake_slack.published) == published
    assert await press_home(bot, "UBOB", nxt["action_id"], nxt["value"]) == 200
    await wait_until(lambda: fake_slack.home_of("UBOB") is not None, timeout=10)
    await bot.idle()
    assert "Deploy plan" not in json.dumps(fake_slack.home_of("UBOB"))
    # The link button to a card is acknowledged (Slack sends its click too).
    assert await press_home(bot, "UALICE", OPEN_CARD, "1") == 200


async def test_waiting_for_you_links_the_card_and_declines_from_the_home(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Script(tool_calls=[call("create_task", CREATE)]), Script(text="Noted."))
    root = await bot.mention("C1", "track the login bug", fake_slack)
    await bot.idle()
    (card,) = fake_slack.cards("C1")
    home = await open_home(bot, fake_slack, "UALICE")
    waiting = json.dumps(home["blocks"][:4])
    assert "Create task 'Fix login bug'" in waiting
    assert "asked by <@UALICE>" in waiting
    opener = button(home, OPEN_CARD)
    # The card's link opens its thread, with the answer around it.
    assert opener["url"] == (
        f"https://test.slack.com/archives/C1/p{card.ts.replace('.', '')}?thread_ts={root}&cid=C1"
    )
    assert not any(
        e.get("action_id") == cards.APPROVE
        for b in home["blocks"]
        if b["type"] == "actions"
        for e in b["elements"]
    )  # approving needs the card itself, where every character of the write is shown
    decline = button(home, cards.DECLINE)

    # Bob may not decide it: his click from a copy of the button changes nothing.
    await press_home(bot, "UBOB", cards.DECLINE, decline["value"])
    await bot.idle()
    async with bot.countersign.db.transaction() as session:
        assert (await session.scalars(select(Proposal.state))).one() == ProposalState.PROPOSED

    opened = len(fake_slack.views)
    assert await press_home(bot, "UALICE", cards.DECLINE, decline["value"]) == 200
    await wait_until(lambda: len(fake_slack.views) > opened, timeout=10)
    modal = fake_slack.views[-1]["view"]
    assert modal["callback_id"] == cards.DECLINE_MODAL
    status, _ = await bot.submit_view(modal, "UALICE", {"reason": "not now"})
    assert status == 200
    await bot.idle()
    async with bot.countersign.db.transaction() as session:
        assert (await session.scalars(select(Proposal.state))).one() == ProposalState.DECLINED
    await wait_until(
        lambda: "Nothing is waiting for you." in json.dumps(fake_slack.home_of("UALICE")),
        timeout=10,
    )
    refreshed = json.dumps(fake_slack.home_of("UALICE"), ensure_ascii=False)
    assert "→ *declined* by <@UALICE>" in refreshed


async def test_an_approver_sees_the_title_only_of_conversations_they_could_read(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    """Bob approves the board's writes. Alice's request in #general (which Bob may read) is
    listed for him with its title and thread; what Alice asked in her DM is not his to see:
    neither the action nor the conversation's title reach his Home."""
    policies = {"tasks": {"approvers": ["UBOB"]}}
    bot = await start_bot(
        make_settings(fake_slack, fake_model, sqlite_url, approval_policies=policies)
    )
    try:
        fake_model.script(Script(tool_calls=[call("create_task", CREATE)]))
        await bot.mention("C1", "the login bug needs a task", fake_slack)
        await bot.idle()
        fake_model.script(Script(tool_calls=[call("create_task", CREATE, "c2")]))
        await bot.say(fake_slack, "DALICE", "my salary talk with Dana needs a task")
        await bot.idle()
        bobs = json.dumps(await open_home(bot, fake_slack, "UBOB"), ensure_ascii=False)
        assert "Create task 'Fix login bug'" in bobs
        assert "|the login bug needs a task>" in bobs  # a public thread he may read
        assert "salary" not in bobs
        assert "DALICE" not in bobs
        assert bobs.count("Create task 'Fix login bug'") == 1
        alices = json.dumps(await open_home(bot, fake_slack, "UALICE"), ensure_ascii=False)
        assert "my salary talk with Dana needs a task" in alices
    finally:
        await stop_bot(bot)
