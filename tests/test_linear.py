"""The `linear` pack through the front door, against a recording fake of Linear's GraphQL API:
names resolved and shown by name, exactly one mutation with the approved values, a client-chosen
id that makes a retry safe, staleness by value (a renamed state is not a change), ambiguous and
unknown names told to the model, rate limits."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from bot.slack import cards
from bot.tools.packs.linear.resolve import client_id
from tests.card_reading import card_fields
from tests.fakes.linear import API_KEY, FakeLinear
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack
from tests.harness import RunningBot, make_settings, start_bot, stop_bot
from tests.test_approvals_flow import call, card_text, proposals, tool_results


@pytest.fixture
def fake_linear() -> Iterator[FakeLinear]:
    linear = FakeLinear().start()
    linear.add_issue("ENG", "Checkout button frozen")
    yield linear
    linear.stop()


@pytest.fixture
async def lin_bot(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, fake_linear: FakeLinear, sqlite_url: str
) -> AsyncIterator[RunningBot]:
    running = await start_bot(
        make_settings(
            fake_slack,
            fake_model,
            sqlite_url,
            linear_api_key=API_KEY,
            linear_api_url=fake_linear.api_url,
        )
    )
    yield running
    await stop_bot(running)


def mutations(linear: FakeLinear) -> list[dict[str, Any]]:
    return [m.variables for m in linear.mutations()]


async def test_a_create_card_shows_names_and_runs_once_with_ids_and_a_client_chosen_id(
    lin_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI, fake_linear: FakeLinear
) -> None:
    create = {
        "team": "eng",
        "title": "Refund flow times out",
        "priority": "high",
        "assignee": "dana",
        "labels": ["bug", "customer"],
        "state": "in progress",
        "project": "Checkout revamp",
    }
    fake_model.script(
        Script(tool_calls=[call("linear_create_issue", create)]), Script(text="Filed.")
    )
    await lin_bot.mention("C1", "file the refund timeout for Dana", fake_slack)
    await lin_bot.idle()
    (card,) = fake_slack.cards("C1")
    shown = card_text(card)
    assert "Create a Linear issue in Engineering (ENG): Refund flow times out" in shown
    fields = card_fields(card)  # as sent, and the names the tool resolved them to
    assert fields["Assignee"] == "dana (means Dana Smith)"
    assert fields["Labels"] == "bug, customer (means Bug, Customer)"
    assert fields["State"] == "in progress (means In Progress)"
    assert mutations(fake_linear) == []
    fake_linear.lose_answer_of = "CreateIssue"  # made, but the answer is lost
    await lin_bot.click(card, cards.APPROVE, "UALICE", "C1")
    await lin_bot.idle()
    (proposal,) = await proposals(lin_bot)
    assert proposal.state.value == "unknown"  # made, answer lost: it may have happened
    await lin_bot.click_value(proposal.id, cards.RETRY, "UALICE", "C1", fake_slack)
    await lin_bot.idle()
    (proposal,) = await proposals(lin_bot)
    assert proposal.state.value == "succeeded"
    (sent,) = mutations(fake_linear)  # the retry found it by its id: no second create
    expected_id = client_id(proposal.idempotency_key, "issue")
    assert sent["input"]["id"] == expected_id
    made = fake_linear.issues[expected_id]
    assert sent["input"]["teamId"] == fake_linear.teams[0]["id"]
    assert sent["input"]["priority"] == 2
    assert sent["input"]["stateId"] == fake_linear.state("ENG", "In Progress")["id"]
    assert sent["input"]["assigneeId"] == fake_linear.users[0]["id"]
    assert [lb["name"] for lb in made["labels"]["nodes"]] == ["Bug", "Customer"]
    assert proposal.result_summary == f"Created {made['identifier']}"
    assert len([i for i in fake_linear.issues.values() if i["title"] == create["title"]]) == 1


async def test_update_compares_ids_so_a_renamed_state_is_fine_and_a_moved_one_is_stale(
    lin_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI, fake_linear: FakeLinear
) -> None:
    fake_model.script(
        Script(
            tool_calls=[
                call(
                    "linear_update_issue", {"issue": "ENG-1", "state": "Done", "priority": "urgent"}
                )
            ]
        ),
        Script(
            tool_calls=[call("linear_move_issue", {"issue": "ENG-1", "state": "In Progress"}, "c2")]
        ),
        Script(text="Done."),
    )
    await lin_bot.mention("C1", "close ENG-1, it's urgent", fake_slack)
    await lin_bot.idle()
    (card,) = fake_slack.cards("C1")
    shown = card_text(card)
    assert "Update ENG-1 'Checkout button frozen': priority, state" in shown
    assert card_fields(card)["State"] == "~Todo~ → Done"
    assert card_fields(card)["Priority"] == "~none~ → urgent"
    fake_linear.state("ENG", "Todo")["name"] = "Backlog"  # renamed: the same state
    await lin_bot.click(card, cards.APPROVE, "UALICE", "C1")
    await lin_bot.idle()
    first = (await proposals(lin_bot))[0]
    assert first.state.value == "succeeded"
    (update,) = mutations(fake_linear)
    assert update["input"] == {"priority": 1, "stateId": fake_linear.state("ENG", "Done")["id"]}

    move_card = fake_slack.cards("C1")[-1]
    assert card_fields(move_card)["State"] == "~Done~ → In Progress"
    issue = fake_linear.find("ENG-1")
    assert issue is not None
    issue["state"] = fake_linear.state("ENG", "Backlog")  # someone moved it meanwhile
    await lin_bot.click(move_card, cards.APPROVE, "UALICE", "C1")
    await lin_bot.idle()
    second = (await proposals(lin_bot))[1]
    assert second.state.value == "failed"
    assert "stale: state is now 'Backlog', not 'Done'" in (second.error or "")
    assert len(mutations(fake_linear)) == 1


async def test_ambiguous_and_unknown_names_are_told_to_the_model_without_a_card(
    lin_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI, fake_linear: FakeLinear
) -> None:
    fake_model.script(
        Script(
            tool_calls=[
                call("linear_update_issue", {"issue": "ENG-1", "assignee": "Alex"}),
                call("linear_move_issue", {"issue": "ENG-1", "state": "Shipped"}, "c2"),
                call("linear_create_issue", {"team": "Design", "title": "x"}, "c3"),
            ]
        ),
        Script(text="Which Alex?"),
    )
    await lin_bot.mention("C1", "give ENG-1 to Alex and ship it", fake_slack)
    await lin_bot.idle()
    assert fake_slack.cards("C1") == []
    alex, shipped, team = tool_results(fake_model)
    assert alex["status"] == "invalid_arguments"
    assert (
        "assignee: 'Alex' is ambiguous, it matches: Alex Kim (alexk, alex.k@x.co); "
        in (alex["error"])
    )
    assert "Alex Lee" in alex["error"]
    assert shipped["status"] == "invalid_arguments"
    assert (
        "state (team ENG): 'Shipped' not found (choices: Todo; In Progress; Done)"
        in (shipped["error"])
    )
    assert (
        "team: 'Design' not found (choices: Engineering (ENG); Operations (OPS))" in (team["error"])
    )
    assert mutations(fake_linear) == []


async def test_reads_and_a_rate_limit_waited_out_or_reported(
    lin_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI, fake_linear: FakeLinear
) -> None:
    fake_linear.rate_limited_for, fake_linear.limited_times = 1.0, 1
    fake_model.script(
        Script(
            tool_calls=[
                call("linear_get_issue", {"issue": "https://linear.app/acme/issue/ENG-1/checkout"}),
                call("linear_list_states", {"team": "ENG"}, "c2"),
                call("linear_list_labels", {}, "c3"),
                call("linear_list_members", {}, "c4"),
                call("linear_search_issues", {"query": "checkout"}, "c5"),
            ]
        ),
        Script(text="Here."),
    )
    started = time.monotonic()
    await lin_bot.mention("C1", "what's ENG-1?", fake_slack)
    await lin_bot.idle()
    got, states, labels, members, search = tool_results(fake_model)
    assert labels["labels"] == [{"name": "Bug", "team": "ENG"}, {"name": "Customer", "team": None}]
    assert [m["name"] for m in members["members"]] == ["Dana Smith", "Alex Kim", "Alex Lee"]
    assert [i["identifier"] for i in search["issues"]] == ["ENG-1"]
    assert time.monotonic() - started >= 0.9  # waited for the reset
    assert (got["identifier"], got["state"], got["cycle"]) == ("ENG-1", "Todo", "Cycle 12")
    assert [s["name"] for s in states["states"]] == ["Todo", "In Progress", "Done"]

    fake_linear.rate_limited_for, fake_linear.limited_times = 1800.0, 3
    fake_model.script(Script(tool_calls=[call("linear_list_teams", {})]), Script(text="Limited."))
    await lin_bot.mention("C2", "teams?", fake_slack)
    await lin_bot.idle()
    (result,) = tool_results(fake_model)
    assert result["status"] == "error"
    assert (
        "Linear's rate limit stopped listing teams; it lifts in about 30 minute(s)"
        in (result["error"])
    )


async def test_doctor_asks_linear_for_the_viewer(fake_linear: FakeLinear) -> None:
    from bot.doctor_integrations import check_linear
    from bot.tools.integration_settings import IntegrationSettings

    good = IntegrationSettings(
        _env_file=None, linear_api_key=API_KEY, linear_api_url=fake_linear.api_url
    )
    (check,) = await check_linear(good)
    assert check.ok
    assert "authenticated as Countersign" in check.detail
    bad = IntegrationSettings(
        _env_file=None, linear_api_key="lin_api_wrong", linear_api_url=fake_linear.api_url
    )
    (check,) = await check_linear(bad)
    assert not check.ok
    assert "Linear rejected LINEAR_API_KEY" in check.detail
    assert "lin_api_wrong" not in check.detail


async def test_a_comment_whose_answer_was_lost_is_not_posted_twice_on_retry(
    lin_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI, fake_linear: FakeLinear
) -> None:
    fake_model.script(
        Script(tool_calls=[call("linear_comment", {"issue": "ENG-1", "body": "Repro attached."})]),
        Script(text="Done."),
    )
    await lin_bot.mention("C1", "comment on ENG-1", fake_slack)
    await lin_bot.idle()
    fake_linear.lose_answer_of = "CreateComment"
    await lin_bot.click(fake_slack.cards("C1")[0], cards.APPROVE, "UALICE", "C1")
    await lin_bot.idle()
    (proposal,) = await proposals(lin_bot)
    assert proposal.state.value == "unknown"  # made, answer lost: it may have happened
    await lin_bot.click_value(proposal.id, cards.RETRY, "UALICE", "C1", fake_slack)
    await lin_bot.idle()
    (proposal,) = await proposals(lin_bot)
    assert proposal.state.value == "succeeded"
    issue = fake_linear.find("ENG-1")
    assert issue is not None
    assert [c["body"] for c in issue["comments"]["nodes"]] == ["Repro attached."]
    assert [c["input"]["id"] for c in mutations(fake_linear)] == [
        client_id(proposal.idempotency_key, "comment")
    ]
