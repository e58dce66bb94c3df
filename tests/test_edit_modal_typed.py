"""The Edit modal is typed from the tool's schema (issue 26): each kind of argument gets the
Slack element a person expects, labelled in words and showing the card's current value; what
comes back in Slack's state shapes is read as the tool takes it; problems are said in words on
their own field, and a crafted payload changes nothing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import pytest

from bot.slack import cards
from tests import typed_pack
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack
from tests.harness import RunningBot, make_settings, start_bot, stop_bot
from tests.test_approvals_flow import call, proposals

STARTS = "2026-12-01T09:00:00+02:00"
PLAN: dict[str, Any] = {
    "owner": "UBOB",
    "reviewer": "UDANA",
    "watchers": ["UBOB", "UDANA"],
    "channel": "C1",
    "also_in": ["C2"],
    "due_date": "2026-11-27",
    "starts_at": STARTS,
    "priority": "high",
    "size": "medium",
    "estimate_hours": 3,
    "budget": 120.5,
    "billable": True,
    "labels": ["backend", "auth"],
    "notes": "Line one\nline two",
}


@pytest.fixture
async def typed_bot(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> AsyncIterator[RunningBot]:
    packs = ["bot.tools.packs.tasks", "tests.typed_pack"]
    running = await start_bot(make_settings(fake_slack, fake_model, sqlite_url, tool_packs=packs))
    yield running
    await stop_bot(running)


async def open_edit(
    bot: RunningBot, slack: FakeSlack, model: FakeOpenAI, plan: dict[str, Any] | None = None
) -> dict[str, Any]:
    model.script(Script(tool_calls=[call("plan_work", plan or PLAN)]))
    await bot.mention("C1", "plan the SSO work", slack)
    await bot.idle()
    assert slack.cards("C1"), model.requests[-1].body["messages"][-1]
    (card,) = slack.cards("C1")
    await bot.click(card, cards.EDIT, "UALICE", "C1")
    await bot.idle()
    view: dict[str, Any] = slack.views[-1]["view"]
    assert view["callback_id"] == cards.EDIT_MODAL
    return view


def inputs(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {b["block_id"]: b for b in view["blocks"] if b["type"] == "input"}


async def submit(bot: RunningBot, view: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    status, answer = await bot.submit_view(view, "UALICE", values)
    assert status == 200
    await bot.idle()
    return json.loads(answer) if answer.strip() else {}


async def test_each_kind_of_argument_gets_its_slack_element_showing_the_card_value(
    typed_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    view = await open_edit(typed_bot, fake_slack, fake_model)
    blocks = inputs(view)
    element = {name: b["element"] for name, b in blocks.items()}
    kinds = {name: e["type"] for name, e in element.items()}
    assert kinds == {
        "owner": "users_select",
        "reviewer": "multi_users_select",  # optional: Slack's single picker cannot be emptied
        "watchers": "multi_users_select",
        "channel": "conversations_select",
        "also_in": "multi_conversations_select",
        "due_date": "datepicker",
        "due_date::clear": "checkboxes",  # nor can a date picker
        "starts_at": "datetimepicker",
        "priority": "static_select",
        "size": "static_select",
        "estimate_hours": "number_input",
        "budget": "number_input",
        "billable": "checkboxes",
        "labels": "plain_text_input",
        "notes": "plain_text_input",
    }
    assert blocks["estimate_hours"]["label"]["text"] == "Estimate hours"
    assert blocks["due_date"]["label"]["text"] == "Due date"
    assert element["owner"]["initial_user"] == "UBOB"
    assert element["reviewer"]["initial_users"] == ["UDANA"]
    assert element["reviewer"]["max_selected_items"] == 1
    assert element["channel"]["initial_conversation"] == "C1"
    assert element["channel"]["filter"] == {"include": ["public", "private"]}
    assert element["due_date"]["initial_date"] == "2026-11-27"
    assert element["starts_at"]["initial_date_time"] == int(
        datetime.fromisoformat(STARTS).timestamp()
    )
    priority = element["priority"]
    assert [o["text"]["text"] for o in priority["options"]] == ["Low", "Normal", "High", "Urgent"]
    assert priority["initial_option"] == {
        "text": {"type": "plain_text", "text": "High"},
        "value": "high",
    }
    assert next(o["text"]["text"] for o in element["size"]["options"]) == "None"
    number = element["estimate_hours"]
    assert {k: number[k] for k in ("is_decimal_allowed", "min_value", "max_value")} == {
        "is_decimal_allowed": False,
        "min_value": "1",
        "max_value": "40",
    }
    assert number["initial_value"] == "3"
    assert element["budget"]["is_decimal_allowed"] is True
    assert element["budget"]["initial_value"] == "120.5"
    assert element["billable"]["initial_options"] == element["billable"]["options"]
    assert element["notes"]["multiline"] is True
    shown = json.dumps(view)
    assert "estimate_hours" not in json.dumps([b["label"] for b in blocks.values()])
    assert "Slack user id" not in shown


async def test_what_a_person_picks_is_read_back_as_the_tool_takes_it(
    typed_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    view = await open_edit(typed_bot, fake_slack, fake_model)
    later = int(datetime.fromisoformat(STARTS).timestamp()) + 3600
    answer = await submit(
        typed_bot,
        view,
        {
            "owner": "UDANA",
            "watchers": ["UALICE"],
            "channel": "C2",
            "also_in": [],
            "due_date": "2026-12-24",
            "starts_at": later,
            "priority": "urgent",
            "estimate_hours": "8",
            "budget": "99.75",
            "billable": "",
            "labels": "backend, sso",
        },
    )
    assert answer == {}
    (proposal,) = await proposals(typed_bot)
    assert proposal.revision == 2
    assert proposal.arguments == {
        **PLAN,
        "owner": "UDANA",
        "watchers": ["UALICE"],
        "channel": "C2",
        "also_in": [],
        "due_date": "2026-12-24",
        "starts_at": "2026-12-01T10:00:00+02:00",  # an hour later, in the card's own zone
        "priority": "urgent",
        "estimate_hours": 8,
        "budget": 99.75,
        "billable": False,
        "labels": ["backend", "sso"],
    }
    await typed_bot.click(fake_slack.cards("C1")[0], cards.APPROVE, "UALICE", "C1")
    await typed_bot.idle()
    assert typed_pack.SENT[-1] == proposal.arguments


async def test_saving_untouched_keeps_every_value_and_its_zone(
    typed_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    view = await open_edit(typed_bot, fake_slack, fake_model)
    assert await submit(typed_bot, view, {}) == {}
    (proposal,) = await proposals(typed_bot)
    assert proposal.arguments == PLAN
    assert proposal.arguments["starts_at"] == STARTS  # not turned into UTC


async def test_optional_fields_can_be_cleared(
    typed_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    view = await open_edit(typed_bot, fake_slack, fake_model)
    size = inputs(view)["size"]["element"]["options"][0]["value"]  # the "None" option
    answer = await submit(
        typed_bot,
        view,
        {"reviewer": [], "due_date::clear": "clear", "size": size, "budget": "", "notes": ""},
    )
    assert answer == {}
    (proposal,) = await proposals(typed_bot)
    assert proposal.revision == 2
    cleared = {k: proposal.arguments[k] for k in ("reviewer", "due_date", "size", "budget")}
    assert cleared == {"reviewer": None, "due_date": None, "size": None, "budget": None}
    assert proposal.arguments["notes"] == ""
    assert proposal.arguments["priority"] == "high"


async def test_problems_are_said_in_words_on_their_fields_and_nothing_is_lost(
    typed_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    view = await open_edit(typed_bot, fake_slack, fake_model)
    answer = await submit(
        typed_bot,
        view,
        {
            "owner": "",  # required, emptied
            "reviewer": "bob",  # not a person's id
            "channel": "general",
            "due_date": "27/11/2026",
            "starts_at": "",
            "priority": "meh",  # not on the menu
            "estimate_hours": "99",  # over the schema's maximum
            "budget": "1e400",
            "billable": "maybe",
        },
    )
    assert answer["response_action"] == "errors"
    assert answer["errors"] == {
        "owner": "Choose a person",
        "reviewer": "Choose a person",
        "channel": "Choose a channel",
        "due_date": "Due date must be a date",
        "starts_at": "Pick a date and time",
        "priority": "Choose one of the options",
        "estimate_hours": "Estimate hours must be a whole number from 1 to 40",
        "budget": "Budget must be a number from 0 to 1,000",
        "billable": "Billable: tick the box or leave it empty",
    }
    for said in answer["errors"].values():
        assert "^" not in said
        assert "pattern" not in said
    (proposal,) = await proposals(typed_bot)
    assert (proposal.revision, proposal.arguments) == (1, PLAN)


async def test_a_block_the_modal_did_not_have_refuses_the_edit(
    typed_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    view = await open_edit(typed_bot, fake_slack, fake_model)
    answer = await submit(typed_bot, view, {"priority": "low", "approver": "UMALLORY"})
    assert answer["errors"] == {
        "owner": "This form held a field Countersign did not make, so nothing changed."
    }
    (proposal,) = await proposals(typed_bot)
    assert (proposal.revision, proposal.arguments) == (1, PLAN)
