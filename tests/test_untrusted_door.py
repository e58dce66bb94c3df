"""Untrusted input and the one door, through the front door (issue 27 part 2): a grant or an
allow rule does not cover a write proposed after a tool result (a card instead), unless the
rule says `after_untrusted: allow`; a rule on `untrusted` and `sources` routes it; an `ask`
on a read makes a card, runs once after Approve and the model resumes with its result, and a
Decline is told to the model."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from bot.approvals.questions import recorded_context
from bot.db.models import Message, PolicyDecision
from bot.policy.model import load_text
from bot.policy.replay import compare
from bot.slack import cards
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack
from tests.harness import RunningBot, make_settings, start_bot, stop_bot
from tests.test_approvals_flow import CREATE, call, card_text, proposals, tool_results

POLICY = """\
version: 1
default: ask
rules:
  - name: low-runs
    tools: [create_task]
    when: 'args.priority == "low"'
    outcome: allow
  - name: normal-runs-anyway
    tools: [create_task]
    when: 'args.priority == "normal"'
    outcome: allow
    after_untrusted: allow
  - name: urgent-after-a-tool-goes-to-bob
    tools: [create_task]
    when: 'args.priority == "urgent" && untrusted && sources.exists(s, s.kind == "tool")'
    outcome: ask
    approvers: [UBOB]
  - name: tasks
    tools: [create_task]
    outcome: ask
    grants: [once, thread]
  - name: done-tasks-are-asked
    tools: [list_tasks]
    when: 'args.status == "done"'
    outcome: ask
"""

HOUR_AGO = datetime.now(UTC) - timedelta(hours=1)
LIST = {"status": "open", "assignee": None, "text": None, "limit": 5}
DONE = {**LIST, "status": "done"}


@pytest.fixture
async def door_bot(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, tmp_path: Path
) -> AsyncIterator[RunningBot]:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    running = await start_bot(make_settings(fake_slack, fake_model, sqlite_url, policy_file=path))
    yield running
    await stop_bot(running)


def task(priority: str, title: str) -> dict[str, Any]:
    return {**CREATE, "priority": priority, "title": title}


async def decisions(bot: RunningBot) -> list[PolicyDecision]:
    async with bot.countersign.db.transaction() as session:
        found = await session.scalars(select(PolicyDecision).order_by(PolicyDecision.id))
        return list(found.all())


async def test_grants_and_allows_do_not_cover_a_write_after_a_tool_result(
    door_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = door_bot
    # A thread grant, made before any untrusted input.
    fake_model.script(
        Script(tool_calls=[call("create_task", task("high", "first"))]), Script(text="ok")
    )
    thread = await bot.mention("C1", "track it", fake_slack)
    await bot.idle()
    (card,) = fake_slack.cards("C1")
    assert await bot.click(card, cards.APPROVE_GRANT["thread"], "UALICE", "C1") == 200
    await bot.idle()
    # In the same thread: the grant covers a write proposed before any read ...
    fake_model.script(
        Script(tool_calls=[call("create_task", task("high", "covered"), "c1")]),
        Script(tool_calls=[call("list_tasks", LIST, "c2")]),
        # ... and after the tool result: the grant does not, an allow rule does not, a rule
        # saying `after_untrusted: allow` does, and a rule on `untrusted`/`sources` routes.
        Script(
            tool_calls=[
                call("create_task", task("high", "after the read"), "c3"),
                call("create_task", task("low", "low after the read"), "c4"),
                call("create_task", task("normal", "normal after the read"), "c5"),
                call("create_task", task("urgent", "urgent after the read"), "c6"),
            ]
        ),
        Script(text="done"),
    )
    await bot.mention("C1", "and more", fake_slack, thread_ts=thread)
    await bot.idle()
    made = {p.arguments["title"]: p for p in await proposals(bot)}
    assert made["covered"].decided_by is not None
    assert made["covered"].decided_by.startswith("grant:")
    assert made["covered"].state.value == "succeeded"
    assert made["normal after the read"].decided_by == "policy:normal-runs-anyway"
    for title in ("after the read", "low after the read", "urgent after the read"):
        assert made[title].state.value == "proposed", title
        assert made[title].decided_by is None
    assert (made["after the read"].policy or {}).get("after_untrusted") == "ask"
    low = made["low after the read"].policy or {}
    assert (low["rule"], low["after_untrusted"]) == ("low-runs", "ask")
    assert "a tool result (list_tasks" in low["untrusted"]
    assert (made["urgent after the read"].policy or {})["approvers"] == ["UBOB"]
    # The card of the downgraded allow is the requester's to decide, like a card without a
    # policy; Bob decides the routed one, Alice may not.
    urgent = next(c for c in fake_slack.cards("C1") if "urgent after the read" in card_text(c))
    assert await bot.click(urgent, cards.APPROVE, "UALICE", "C1") == 200
    await bot.idle()
    still = {p.arguments["title"]: p for p in await proposals(bot)}
    assert still["urgent after the read"].state.value == "proposed"
    # An Edit keeps what the call followed: Bob's revision is decided again, still routed to
    # him, never to a rule the untrusted input would not reach.
    assert await bot.click(urgent, cards.EDIT, "UBOB", "C1") == 200
    await bot.idle()
    modal = fake_slack.views[-1]["view"]
    status, answer = await bot.submit_view(modal, "UBOB", {"title": "urgent, edited"})
    assert status == 200, answer
    await bot.idle()
    edited = next(p for p in await proposals(bot) if p.id == made["urgent after the read"].id)
    assert edited.revision == 2
    assert (edited.policy or {})["rule"] == "urgent-after-a-tool-goes-to-bob"
    edits = [d for d in await decisions(bot) if d.step == "edit" and d.proposal_id == edited.id]
    assert edits
    assert recorded_context(edits[-1].groups)[1]["sources"][0]["kind"] == "tool"
    # The record says why, and `policy replay`'s inputs carry what the call followed.
    replayed = await compare(bot.countersign.db, load_text(POLICY), "1@x", since=HOUR_AGO)
    assert (replayed.asks_removed, replayed.denials_allowed) == (0, [])  # reproduced
    rows = [d for d in await decisions(bot) if d.proposal_id == made["low after the read"].id]
    _groups, context = recorded_context(rows[0].groups)
    assert context["sources"][0]["kind"] == "tool"


async def test_an_ask_on_a_read_is_a_card_that_runs_once_after_approve(
    door_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = door_bot
    fake_model.script(
        Script(tool_calls=[call("list_tasks", DONE)]),
        Script(text="Here is what is done."),
    )
    await bot.mention("C1", "what is done?", fake_slack)
    await bot.idle()
    (card,) = fake_slack.cards("C1")
    assert "Looking up tasks" in card_text(card)
    assert '\\"done\\"' in card_text(card) or "done" in card_text(card)
    (proposal,) = await proposals(bot)
    assert proposal.state.value == "proposed"
    assert len(fake_model.requests) == 1  # the turn waits for a person
    assert await bot.click(card, cards.APPROVE, "UALICE", "C1") == 200
    await bot.idle()
    (proposal,) = await proposals(bot)
    assert proposal.state.value == "succeeded"
    assert proposal.attempts == 1
    (result,) = tool_results(fake_model)
    assert result == {"status": "succeeded", "result": {"tasks": []}}
    assert fake_slack.bot_messages("C1")[-1].text == "Here is what is done."
    # Its result is a tool result like any read's: what follows it followed a tool.
    async with bot.countersign.db.transaction() as session:
        stored = await session.get(Message, proposal.result_message_id)
        assert stored is not None
        assert stored.source is not None
        assert stored.source.startswith("list_tasks")
    # A crafted click on the settled card runs nothing again.
    await bot.click_value(proposal.id, cards.APPROVE, "UALICE", "C1", fake_slack)
    await bot.idle()
    assert (await proposals(bot))[0].attempts == 1

    # Declined: the model is told, nothing runs.
    fake_model.script(Script(tool_calls=[call("list_tasks", DONE)]), Script(text="Alright."))
    await bot.mention("C2", "what is done here?", fake_slack)
    await bot.idle()
    (card,) = fake_slack.cards("C2")
    await bot.click(card, cards.DECLINE, "UALICE", "C2")
    await bot.idle()
    modal = fake_slack.views[-1]["view"]
    await bot.submit_view(modal, "UALICE", {"reason": "not now"})
    await bot.idle()
    (result,) = tool_results(fake_model)
    assert (result["status"], result["reason"]) == ("declined", "not now")
    assert (await proposals(bot))[-1].attempts == 0
