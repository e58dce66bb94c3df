""" "Ask for changes" through the front door: an authorised approver sends a proposal back with
a note; the requester reads it in the thread, the model resumes with it and may propose again
(a new card, which can be approved: the write happens once, with the revised arguments). The
note is required and bounded, validated inline; it pings nobody; a stranger, a stale revision or
a card already decided changes nothing; and asking for changes never leaves a grant."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from copy import deepcopy
from pathlib import Path
from typing import Any

import pytest

from bot.approvals.service import CardChanged
from bot.db.models import ProposalState
from bot.records.audit_export import audit_rows
from bot.slack import cards
from bot.slack.note_forms import NOTE_MAX
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack, StoredMessage
from tests.harness import RunningBot, make_settings, start_bot, stop_bot
from tests.test_approvals_flow import (
    CREATE,
    audit,
    call,
    card_mrkdwn,
    card_text,
    proposals,
    tasks_in_db,
    tool_results,
)
from tests.test_audience import SECRET, private_exec, read_exec
from tests.test_grants import POLICY, grants_in_db, labels
from tests.test_records import answer, text_of

REVISED = {**CREATE, "priority": "low", "title": "Fix login bug (SSO only)"}


@pytest.fixture
async def bot(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, tmp_path: Path
) -> AsyncIterator[RunningBot]:
    """Approvers UBOB, UALICE and UCAT, with grants offered on the card; UMALLORY is none."""
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    running = await start_bot(make_settings(fake_slack, fake_model, sqlite_url, policy_file=path))
    yield running
    await stop_bot(running)


async def proposed(bot: RunningBot, slack: FakeSlack, model: FakeOpenAI) -> StoredMessage:
    """Alice asks; the model proposes `create_task`; its card is returned."""
    model.script(Script(text="I'll file it.", tool_calls=[call("create_task", CREATE)]))
    await bot.mention("C1", "track the login bug", slack)
    await bot.idle()
    (card,) = slack.cards("C1")
    return card


async def open_modal(
    bot: RunningBot, slack: FakeSlack, card: StoredMessage, user: str, channel: str = "C1"
) -> Any:
    """`user` clicks Ask for changes; the modal it opened, or None."""
    opened = len(slack.views)
    await bot.click(card, cards.ASK_CHANGES, user, channel)
    await bot.idle()
    return slack.views[-1]["view"] if len(slack.views) > opened else None


async def submit(bot: RunningBot, modal: Any, user: str, note: str) -> dict[str, Any]:
    """Submit the modal; Slack's answer (`errors` when refused inline)."""
    status, answer = await bot.submit_view(modal, user, {"note": note})
    assert status == 200
    await bot.idle()
    return json.loads(answer) if answer else {}


async def test_changes_reach_the_requester_and_the_model_which_proposes_again(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    card = await proposed(bot, fake_slack, fake_model)
    assert "Ask for changes" in labels(card)
    fake_model.script(
        Script(text="Revised.", tool_calls=[call("create_task", REVISED, "call_2")]),
        Script(text="Filed as TASK-1."),
    )
    modal = await open_modal(bot, fake_slack, card, "UBOB")
    assert modal["callback_id"] == cards.ASK_CHANGES_MODAL
    (note_input,) = [b for b in modal["blocks"] if b["type"] == "input"]
    assert note_input["optional"] is False
    assert note_input["element"]["max_length"] == NOTE_MAX

    assert await submit(bot, modal, "UBOB", "Low priority, SSO only please") == {}

    first = (await proposals(bot))[0]
    assert first.state == ProposalState.CHANGES_ASKED
    assert (first.decided_by, first.decline_reason) == ("UBOB", "Low priority, SSO only please")
    (asked,) = [a for a in await audit(bot) if a.event == "ask_changes"]
    assert (asked.from_state, asked.to_state, asked.actor) == ("proposed", "changes_asked", "UBOB")
    assert asked.detail == {"note": "Low priority, SSO only please", "revision": 1}
    shown = card_text(fake_slack.cards("C1")[0])
    assert "*Changes asked* by <@UBOB>: Low priority, SSO only please" in shown
    assert cards.APPROVE not in shown  # no buttons left on a card sent back
    # The requester is named in the thread, with the note, before the model's new reply.
    (told,) = [m for m in fake_slack.bot_messages("C1") if "asked for changes" in m.text]
    assert told.thread_ts == card.thread_ts
    assert "<@UALICE>" in told.text
    assert "<@UBOB>" in told.text
    assert "Low priority, SSO only please" in told.text
    said = [m.text for m in fake_slack.bot_messages("C1")]
    assert said.index(told.text) < next(i for i, t in enumerate(said) if t.startswith("Revised."))
    # The model read the note and may propose again: it did, and a second card asks.
    (result,) = tool_results(fake_model)
    assert result["status"] == "changes_requested"
    assert result["note"] == "Low priority, SSO only please"
    assert "may propose a revised action" in result["instruction"]
    assert await tasks_in_db(bot) == []
    assert await grants_in_db(bot) == []
    _, second = fake_slack.cards("C1")
    assert second.thread_ts == card.thread_ts
    _, _, key = await bot.command(fake_slack, "/approvals", "", "UALICE")
    listed = text_of((await answer(bot, fake_slack, key))["blocks"])
    assert "*changes asked*" in listed
    exported = [row async for row in audit_rows(bot.countersign.db)]
    assert (exported[0]["decision"], exported[0]["decided_by"], exported[0]["reason"]) == (
        "changes_asked",
        "UBOB",
        "Low priority, SSO only please",
    )

    await bot.click(second, cards.APPROVE, "UBOB", "C1")
    await bot.idle()
    (task,) = await tasks_in_db(bot)
    assert (task.title, task.priority) == (REVISED["title"], "low")
    assert [p.state for p in await proposals(bot)] == [
        ProposalState.CHANGES_ASKED,
        ProposalState.SUCCEEDED,
    ]
    assert tool_results(fake_model)[-1]["status"] == "succeeded"
    assert fake_slack.bot_messages("C1")[-1].text == "Filed as TASK-1."
    assert await grants_in_db(bot) == []


async def test_a_strangers_or_a_stale_cards_click_changes_nothing(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    card = await proposed(bot, fake_slack, fake_model)
    shown = deepcopy(card)  # revision 1, before Alice's edit below
    assert await open_modal(bot, fake_slack, card, "UMALLORY") is None
    assert any("Nothing changed" in t for t in fake_slack.ephemerals_for("UMALLORY"))
    # A modal opened for Bob, submitted as Mallory (a crafted payload): refused on the form.
    modal = await open_modal(bot, fake_slack, card, "UBOB")
    answer = await submit(bot, modal, "UMALLORY", "do it my way")
    assert answer["response_action"] == "errors"
    assert "note" in answer["errors"]
    (proposal,) = await proposals(bot)
    assert proposal.state == ProposalState.PROPOSED
    assert proposal.decline_reason is None
    assert [a.event for a in await audit(bot)] == ["propose", "refused", "refused"]
    assert len(fake_model.requests) == 1  # the model was not resumed
    assert not [m for m in fake_slack.bot_messages("C1") if "asked for changes" in m.text]
    # Alice edits her request (revision 2): Bob's click on the card he read is refused.
    await bot.click(card, cards.EDIT, "UALICE", "C1")
    await bot.idle()
    status, _ = await bot.submit_view(fake_slack.views[-1]["view"], "UALICE", {"title": "New"})
    assert status == 200
    await bot.idle()
    assert (await proposals(bot))[0].revision == 2
    assert await open_modal(bot, fake_slack, shown, "UBOB") is None
    assert any("card changed" in t for t in fake_slack.ephemerals_for("UBOB"))
    # ... and so is the modal he opened on revision 1.
    answer = await submit(bot, modal, "UBOB", "too late")
    assert answer["errors"]["note"] == CardChanged().user_message
    (proposal,) = await proposals(bot)
    assert (proposal.state, proposal.decline_reason) == (ProposalState.PROPOSED, None)
    assert len(fake_model.requests) == 1


async def test_the_note_is_required_bounded_and_pings_nobody(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    card = await proposed(bot, fake_slack, fake_model)
    modal = await open_modal(bot, fake_slack, card, "UBOB")
    for empty_or_long in ("", "   \n ", "x" * (NOTE_MAX + 1)):
        answer = await submit(bot, modal, "UBOB", empty_or_long)
        assert answer["response_action"] == "errors"
        assert set(answer["errors"]) == {"note"}
    (proposal,) = await proposals(bot)
    assert proposal.state == ProposalState.PROPOSED
    assert len(fake_model.requests) == 1

    note = "<!channel> & <@UCAT> <https://evil.example|see>"
    assert await submit(bot, modal, "UBOB", note) == {}
    shown = card_mrkdwn(fake_slack.cards("C1")[0]).replace("\u200b", "")  # and no link
    assert "&lt;!channel&gt; &amp; &lt;@UCAT&gt; &lt;https://evil.example|see&gt;" in shown
    (told,) = [m for m in fake_slack.bot_messages("C1") if "asked for changes" in m.text]
    assert "&lt;!channel&gt;" in told.text
    for message in fake_slack.bot_messages("C1"):
        said = message.text + json.dumps(message.blocks or [])
        assert "<!channel>" not in said
        assert "<@UCAT>" not in said
    assert tool_results(fake_model)[0]["note"] == note  # the model reads it as typed


async def test_a_decided_or_stale_card_refuses_the_click_and_the_submission(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    card = await proposed(bot, fake_slack, fake_model)
    shown = deepcopy(card)  # as it was, with its buttons
    modal = await open_modal(bot, fake_slack, card, "UBOB")
    second_modal = await open_modal(bot, fake_slack, card, "UCAT")
    assert await submit(bot, modal, "UBOB", "smaller please") == {}
    requests = len(fake_model.requests)
    # Cat's modal, opened before Bob sent it back: the proposal is terminal now.
    answer = await submit(bot, second_modal, "UCAT", "and sooner")
    assert answer["response_action"] == "errors"
    assert "already changes asked by <@UBOB>" in answer["errors"]["note"]
    assert await open_modal(bot, fake_slack, shown, "UCAT") is None
    assert any("already changes asked" in t for t in fake_slack.ephemerals_for("UCAT"))
    await bot.click(shown, cards.APPROVE, "UCAT", "C1")
    await bot.idle()
    (proposal, *_) = await proposals(bot)
    assert (proposal.state, proposal.decline_reason) == (
        ProposalState.CHANGES_ASKED,
        "smaller please",
    )
    assert [a.event for a in await audit(bot)].count("ask_changes") == 1
    assert len(fake_model.requests) == requests  # resumed once
    assert await tasks_in_db(bot) == []


async def test_a_private_cards_note_goes_to_the_requester_privately(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """A card carrying #exec's text went to Alice by DM: the note follows it there, and only
    people who may read #exec may send it (Bob may approve tasks but is not in #exec)."""
    private_exec(fake_slack)
    fake_slack.members["GEXEC"] = ["UALICE", "UCAT", "UBOT"]
    fake_model.script(
        Script(tool_calls=[read_exec()]),
        Script(tool_calls=[call("create_task", CREATE | {"description": SECRET}, "w1")]),
    )
    await bot.mention("C1", "read GEXEC and track what it says", fake_slack)
    await bot.idle()
    (card,) = fake_slack.cards("DALICE")
    assert await open_modal(bot, fake_slack, card, "UBOB", "DALICE") is None
    assert any("may not read" in text for text in fake_slack.ephemerals_for("UBOB"))
    modal = await open_modal(bot, fake_slack, card, "UCAT", "DALICE")
    assert await submit(bot, modal, "UCAT", "leave the numbers out") == {}
    assert (await proposals(bot))[0].state == ProposalState.CHANGES_ASKED
    (told,) = [m for m in fake_slack.bot_messages("DALICE") if "asked for changes" in m.text]
    assert "leave the numbers out" in told.text
    public = json.dumps([(m.text, m.blocks) for m in fake_slack.channels["C1"]])
    assert "leave the numbers out" not in public
    assert SECRET not in public
