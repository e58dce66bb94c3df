"""Grants from the card, through the front door: "Approve for this thread / channel" and
"Always for me" leave a grant bound to the requester, the tool's definition and the scope;
a covered call runs without a card (a note in the thread and an audit row naming the grant);
another thread, channel, requester or tool still asks; a deny rule wins; expiry, a changed
definition, a stranger's click, a decline or an edit make or keep nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from copy import deepcopy
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, update

from bot.db.models import Grant, ProposalState, utcnow
from bot.records.retention import purge
from bot.slack import cards
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import TEAM_ID, FakeSlack, StoredMessage, wait_until
from tests.harness import RunningBot, make_settings, start_bot, stop_bot
from tests.mcp_helpers import HttpNotes, calls, until
from tests.test_approvals_flow import CREATE, audit, call, proposals, tasks_in_db, tool_results
from tests.test_policy import ask_for

POLICY = """\
version: 1
default: ask
rules:
  - name: nothing-from-here
    tools: [create_task]
    channels: [CDENY]
    outcome: deny
    reason: not from this channel
  - name: tasks
    tools: [create_task, update_task]
    outcome: ask
    approvers: [UBOB, UALICE, UCAT]
    grants: [once, thread, channel, me]
    grant_expiry: 2h
"""

FOUR_EYES = POLICY.replace("    grant_expiry: 2h\n", "    four_eyes: true\n")
THREAD = cards.APPROVE_GRANT["thread"]
CHANNEL = cards.APPROVE_GRANT["channel"]
ME = cards.APPROVE_GRANT["me"]


@pytest.fixture
async def grant_bot(
    request: pytest.FixtureRequest,
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    migrated_database_url: str,
    tmp_path: Path,
) -> AsyncIterator[RunningBot]:
    path = tmp_path / "policy.yaml"
    path.write_text(getattr(request, "param", POLICY))
    running = await start_bot(
        make_settings(
            fake_slack, fake_model, migrated_database_url, policy_file=path, streaming="auto"
        )
    )
    yield running
    await stop_bot(running)


async def grants_in_db(bot: RunningBot) -> list[Grant]:
    async with bot.countersign.db.transaction() as session:
        return list((await session.scalars(select(Grant).order_by(Grant.id))).all())


def labels(card: StoredMessage) -> list[str]:
    return [
        str(e["text"]["text"])
        for b in card.blocks or []
        if b.get("type") == "actions"
        for e in b.get("elements", [])
    ]


async def granted(
    bot: RunningBot, slack: FakeSlack, model: FakeOpenAI, action: str, channel: str = "C1"
) -> str:
    """UALICE asks in a new thread of `channel`; UBOB approves with `action`. The thread."""
    thread = await ask_for(bot, slack, model, CREATE, channel=channel)
    card = slack.cards(channel)[-1]
    assert await bot.click(card, action, "UBOB", channel) == 200
    await bot.idle()
    return thread


async def asks(
    bot: RunningBot,
    slack: FakeSlack,
    model: FakeOpenAI,
    channel: str = "C1",
    user: str = "UALICE",
    thread: str | None = None,
    tool: str = "create_task",
) -> bool:
    """One more call; True if it made a card (asked), False if it ran without one."""
    before = len(slack.cards(channel))
    args = CREATE if tool == "create_task" else {"task_id": 1, "title": "Renamed"}
    model.script(Script(tool_calls=[call(tool, args)]))  # the model's default answers after
    await bot.mention(channel, "again", slack, user=user, thread_ts=thread)
    await bot.idle()
    return len(slack.cards(channel)) > before


async def test_the_card_offers_the_rules_grants_by_their_names(
    grant_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    await ask_for(grant_bot, fake_slack, fake_model, CREATE)
    (card,) = fake_slack.cards("C1")
    assert labels(card) == [
        "Approve once",
        "Approve for this thread",
        "Approve for this channel",
        "Always for me",
        "Decline",
        "Ask for changes",
        "Edit",
    ]


BOB_APPROVES = POLICY.replace("approvers: [UBOB, UALICE, UCAT]", "approvers: [UBOB]")


@pytest.mark.parametrize("grant_bot", [FOUR_EYES, BOB_APPROVES], indirect=True)
async def test_always_for_me_is_offered_only_where_the_requester_may_self_approve(
    grant_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    await ask_for(grant_bot, fake_slack, fake_model, CREATE)
    (card,) = fake_slack.cards("C1")
    assert "Always for me" not in labels(card)
    assert "Approve for this thread" in labels(card)
    crafted = deepcopy(card)  # an "Always for me" the card did not offer
    for block in crafted.blocks or []:
        for element in block.get("elements", []):
            if element.get("action_id") == THREAD:
                element["action_id"] = ME
    await grant_bot.click(crafted, ME, "UBOB", "C1")  # approves, grants nothing
    await grant_bot.idle()
    assert len(await tasks_in_db(grant_bot)) == 1
    assert await grants_in_db(grant_bot) == []


async def test_a_thread_grant_covers_that_requesters_tool_in_that_thread_only(
    grant_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = grant_bot
    thread = await granted(bot, fake_slack, fake_model, THREAD)
    (grant,) = await grants_in_db(bot)
    assert (grant.scope, grant.requester, grant.granted_by) == ("thread", "UALICE", "UBOB")
    assert grant.definition.startswith("sha256:")
    assert grant.expires_at is not None
    assert timedelta(minutes=119) < grant.expires_at - utcnow() <= timedelta(hours=2)
    assert any(a.event == "grant" and a.actor == "UBOB" for a in await audit(bot))

    assert not await asks(bot, fake_slack, fake_model, thread=thread)  # covered: ran
    assert len(await tasks_in_db(bot)) == 2
    last = (await proposals(bot))[-1]
    assert last.state == ProposalState.SUCCEEDED
    assert last.decided_by == f"grant:{grant.id}"
    approve = [a for a in await audit(bot) if a.event == "approve"][-1]
    assert approve.actor == f"grant:{grant.id}"
    assert approve.detail is not None
    assert (approve.detail["grant"], approve.detail["granted_by"]) == (grant.id, "UBOB")
    notes = [m.text for m in fake_slack.bot_messages("C1") if "grant" in m.text]
    assert len(notes) == 1
    assert "Ran under <@UBOB>'s grant for this thread" in notes[0]
    assert "revoke" in notes[0]
    link = f"https://x.slack.com/archives/C1/p{thread.replace('.', '')}"
    _, _, key = await bot.command(fake_slack, "/history", link, "UALICE")
    await wait_until(lambda: bool(fake_slack.answers(key)), timeout=10)
    history = texts(fake_slack.answers(key)[-1]["blocks"])
    assert "*succeeded* by a standing grant" in history  # a grant, not a person
    assert f"grant:{grant.id}" not in history  # in words, no key
    assert "*succeeded* by <@UBOB>" in history

    assert await asks(bot, fake_slack, fake_model)  # another thread
    assert await asks(bot, fake_slack, fake_model, thread=thread, user="UCAT")  # another person
    assert await asks(bot, fake_slack, fake_model, thread=thread, tool="update_task")
    assert await asks(bot, fake_slack, fake_model, channel="C2")  # another channel
    assert len(await grants_in_db(bot)) == 1


async def test_a_channel_grant_covers_every_thread_of_that_channel_only(
    grant_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = grant_bot
    await granted(bot, fake_slack, fake_model, CHANNEL)
    assert not await asks(bot, fake_slack, fake_model)  # a new thread of C1
    assert await asks(bot, fake_slack, fake_model, channel="C2")
    assert await asks(bot, fake_slack, fake_model, user="UCAT")
    thread = await ask_for(bot, fake_slack, fake_model, {**CREATE, "title": "x"})
    assert await asks(bot, fake_slack, fake_model, thread=thread, tool="update_task")
    assert [g.scope for g in await grants_in_db(bot)] == ["channel"]


async def test_always_for_me_covers_the_requester_everywhere_but_a_deny_wins(
    grant_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = grant_bot
    await granted(bot, fake_slack, fake_model, ME)
    assert not await asks(bot, fake_slack, fake_model, channel="C2")
    assert await asks(bot, fake_slack, fake_model, channel="C2", user="UCAT")
    before = len(await tasks_in_db(bot))
    assert not await asks(bot, fake_slack, fake_model, channel="CDENY")
    assert tool_results(fake_model)[0]["status"] == "denied"
    assert len(await tasks_in_db(bot)) == before


async def test_approve_once_and_a_strangers_grant_click_make_no_grant(
    grant_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = grant_bot
    thread = await ask_for(bot, fake_slack, fake_model, CREATE)
    (card,) = fake_slack.cards("C1")
    await bot.click(card, CHANNEL, "UMALLORY", "C1")  # not an approver
    await bot.idle()
    assert await tasks_in_db(bot) == []
    assert await grants_in_db(bot) == []
    await bot.click(card, cards.APPROVE, "UBOB", "C1")
    await bot.idle()
    assert len(await tasks_in_db(bot)) == 1
    assert await grants_in_db(bot) == []
    assert await asks(bot, fake_slack, fake_model, thread=thread)


async def test_a_decline_or_an_edit_makes_no_grant(
    grant_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = grant_bot
    thread = await ask_for(bot, fake_slack, fake_model, CREATE)
    (card,) = fake_slack.cards("C1")
    shown = deepcopy(card)  # as it was before the decline, with its grant buttons
    await bot.click(card, cards.DECLINE, "UBOB", "C1")
    await bot.idle()
    modal = fake_slack.views[-1]["view"]
    status, _ = await bot.submit_view(modal, "UBOB", {"reason": "no"})
    assert status == 200
    await bot.idle()
    assert (await proposals(bot))[0].state == ProposalState.DECLINED
    assert await grants_in_db(bot) == []
    assert await asks(bot, fake_slack, fake_model, thread=thread)
    await bot.click(shown, THREAD, "UBOB", "C1")  # too late: it was declined
    await bot.idle()
    assert await grants_in_db(bot) == []
    # an edit: a new revision, no grant; approving it once still leaves none
    second = fake_slack.cards("C1")[-1]
    await bot.click(second, cards.EDIT, "UBOB", "C1")
    await bot.idle()
    modal = fake_slack.views[-1]["view"]
    status, _ = await bot.submit_view(modal, "UBOB", {"title": "Edited title"})
    assert status == 200
    await bot.idle()
    assert (await proposals(bot))[-1].revision == 2
    assert await grants_in_db(bot) == []
    await bot.click(shown, CHANNEL, "UBOB", "C1")  # an old card's button: another proposal
    await bot.click_value((await proposals(bot))[-1].id, cards.APPROVE, "UBOB", "C1", fake_slack)
    await bot.idle()
    assert len(await tasks_in_db(bot)) == 1
    assert await grants_in_db(bot) == []


async def test_an_expired_grant_covers_nothing(
    grant_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = grant_bot
    await granted(bot, fake_slack, fake_model, ME)
    assert not await asks(bot, fake_slack, fake_model)
    async with bot.countersign.db.transaction() as session:
        await session.execute(update(Grant).values(expires_at=utcnow() - timedelta(seconds=1)))
    assert await asks(bot, fake_slack, fake_model)


async def test_a_changed_tool_definition_voids_the_grant(
    grant_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = grant_bot
    await granted(bot, fake_slack, fake_model, ME)
    assert not await asks(bot, fake_slack, fake_model)
    assert bot.countersign.records is not None
    registry: Any = bot.countersign.records.registry  # the one registry every part shares
    tool = registry.get("create_task")
    registry._tools["create_task"] = replace(tool, description=tool.description + " (v2)")
    assert await asks(bot, fake_slack, fake_model)
    registry._tools["create_task"] = tool  # the definition the grant was made for
    assert not await asks(bot, fake_slack, fake_model)


@pytest.fixture
async def replicas(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, migrated_postgres_url: str, tmp_path: Path
) -> AsyncIterator[tuple[RunningBot, RunningBot]]:
    """Two bots on one PostgreSQL database: two replicas."""
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    settings = make_settings(fake_slack, fake_model, migrated_postgres_url, policy_file=path)
    first = await start_bot(settings)
    second = await start_bot(settings)
    yield first, second
    await stop_bot(second)
    await stop_bot(first)


def texts(blocks: list[dict[str, Any]]) -> str:
    return "\n".join(str((b.get("text") or {}).get("text", "")) for b in blocks)


@pytest.mark.postgres
async def test_a_revoke_from_approvals_grants_holds_for_the_next_proposal_on_another_replica(
    replicas: tuple[RunningBot, RunningBot], fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    first, second = replicas
    thread = await granted(first, fake_slack, fake_model, THREAD)
    assert not await asks(first, fake_slack, fake_model, thread=thread)
    assert not await asks(second, fake_slack, fake_model, thread=thread)  # the other replica
    status, _, key = await second.command(fake_slack, "/approvals", "grants", "UCAT")
    assert status == 200
    await wait_until(lambda: bool(fake_slack.answers(key)), timeout=10)
    shown = fake_slack.answers(key)[-1]
    assert "No live grants" in texts(shown["blocks"])  # UCAT neither made one nor is covered
    status, _, key = await second.command(fake_slack, "/approvals", "grants", "UBOB")
    await wait_until(lambda: bool(fake_slack.answers(key)), timeout=10)
    listing = fake_slack.answers(key)[-1]
    (grant,) = await grants_in_db(first)
    assert "*Create task* for <@UALICE>" in texts(listing["blocks"])  # in words, no number
    assert f"Grant {grant.id}" not in texts(listing["blocks"])
    await second.press(fake_slack, listing["blocks"], "grant_revoke", "UCAT")  # not theirs
    await second.idle()
    assert (await grants_in_db(first))[0].revoked_at is None
    key = await second.press(fake_slack, listing["blocks"], "grant_revoke", "UBOB")
    await wait_until(lambda: bool(fake_slack.answers(key)), timeout=10)
    assert "Revoked the grant" in texts(fake_slack.answers(key)[-1]["blocks"])
    (grant,) = await grants_in_db(first)
    assert grant.revoked_by == "UBOB"
    assert await asks(first, fake_slack, fake_model, thread=thread)  # the next one asks
    assert any(a.event == "grant_revoke" and a.actor == "UBOB" for a in await audit(first))


@pytest.mark.postgres
async def test_a_revoke_from_the_app_home_holds_for_the_next_proposal_on_another_replica(
    replicas: tuple[RunningBot, RunningBot], fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    first, second = replicas
    await granted(first, fake_slack, fake_model, ME)
    home = {"type": "app_home_opened", "user": "UALICE", "channel": "D1", "tab": "home"}
    assert await second.send_event({**home, "event_ts": "1.0"}) == 200
    await second.idle()
    view = fake_slack.home_of("UALICE")
    assert view is not None
    assert "*Create task* for <@UALICE> for all their calls" in texts(view["blocks"])
    button = next(
        b["accessory"]
        for b in view["blocks"]
        if b.get("accessory", {}).get("action_id") == "grant_revoke"
    )
    published = len(fake_slack.published)
    status, _ = await second._interact(
        {
            "type": "block_actions",
            "user": {"id": "UALICE", "team_id": TEAM_ID},
            "team": {"id": TEAM_ID},
            "trigger_id": "t",
            "container": {"type": "view", "view_id": "V1"},
            "view": {"id": "V1", "type": "home"},
            "actions": [
                {
                    "type": "button",
                    "action_id": "grant_revoke",
                    "block_id": "b",
                    "value": button["value"],
                    "action_ts": "1.0",
                }
            ],
        }
    )
    assert status == 200
    await second.idle()
    (grant,) = await grants_in_db(first)
    assert grant.revoked_by == "UALICE"  # the covered requester may give it up
    assert len(fake_slack.published) > published
    assert "No live grants" in texts(fake_slack.home_of("UALICE")["blocks"])  # type: ignore[index]
    assert await asks(first, fake_slack, fake_model, channel="C2")


MCP_POLICY = """\
version: 1
default: ask
rules:
  - name: web-notes
    tools: [web]
    outcome: ask
    grants: [once, me]
"""


async def test_an_mcp_tool_whose_schema_changed_is_not_covered_by_its_grant(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "notes.jsonl"
    path = tmp_path / "policy.yaml"
    path.write_text(MCP_POLICY)
    notes = await HttpNotes(log).start("v1")
    settings = make_settings(
        fake_slack,
        fake_model,
        sqlite_url,
        policy_file=path,
        mcp_servers={"mcpServers": {"web": notes.config()}},
        mcp_check_seconds=0.2,
    )
    bot = await start_bot(settings)
    hub = bot.countersign.integrations.mcp
    assert hub is not None

    async def note(title: str) -> bool:
        """True if the call made a card."""
        before = len(fake_slack.cards("C1"))
        fake_model.script(Script(tool_calls=[call("web__add_note", {"title": title, "body": "b"})]))
        await bot.mention("C1", "note it", fake_slack)
        await bot.idle()
        return len(fake_slack.cards("C1")) > before

    try:
        assert await note("first")
        card = fake_slack.cards("C1")[-1]
        assert labels(card)[:2] == ["Approve once", "Always for me"]
        await bot.click(card, ME, "UALICE", "C1")
        await bot.idle()
        (grant,) = await grants_in_db(bot)
        assert grant.definition.startswith("sha256:")
        assert not await note("second")  # covered by the grant
        assert len(calls(log, "add_note")) == 2
        notes.kill()
        await until(lambda: not hub.connections["web"].up)
        await notes.start("v2")  # the same server, its add_note now takes tags
        await until(lambda: hub.connections["web"].up)
        assert await note("third")  # another definition: asked again
        assert len(calls(log, "add_note")) == 2
    finally:
        notes.kill()
        await stop_bot(bot)


async def test_retention_forgets_grants_that_ended_before_the_cutoff_only(
    grant_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = grant_bot
    await granted(bot, fake_slack, fake_model, CHANNEL, channel="C2")
    await granted(bot, fake_slack, fake_model, THREAD, channel="C3")
    await granted(bot, fake_slack, fake_model, ME)
    assert len(await grants_in_db(bot)) == 3
    long_ago = utcnow() - timedelta(days=40)
    async with bot.countersign.db.transaction() as session:
        await session.execute(update(Grant).where(Grant.scope == "me").values(revoked_at=long_ago))
        await session.execute(
            update(Grant).where(Grant.scope == "channel").values(expires_at=long_ago)
        )
    await purge(bot.countersign.db, timedelta(days=30))
    assert [g.scope for g in await grants_in_db(bot)] == ["thread"]  # still live: kept
