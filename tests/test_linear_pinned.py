"""Linear: the ids the card showed are the ids written, through the front door against the fake.

A project made between card and click under the name the model gave is another project: the
action is stale, both shown, nothing written. A second project under the very name the card
showed cannot take the write: the pinned id does. A state or label renamed since the card is
the same thing and still runs. An edit resolves its names again and pins the new ids.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from bot.slack import cards
from tests.fakes.linear import API_KEY, FakeLinear
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack
from tests.harness import RunningBot, make_settings, start_bot, stop_bot
from tests.test_approvals_flow import call, card_text, proposals
from tests.test_linear import mutations


@pytest.fixture
def linear() -> Iterator[FakeLinear]:
    fake = FakeLinear().start()
    fake.add_issue("ENG", "Checkout button frozen")
    yield fake
    fake.stop()


@pytest.fixture
async def bot(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, linear: FakeLinear, sqlite_url: str
) -> AsyncIterator[RunningBot]:
    running = await start_bot(
        make_settings(
            fake_slack,
            fake_model,
            sqlite_url,
            linear_api_key=API_KEY,
            linear_api_url=linear.api_url,
        )
    )
    yield running
    await stop_bot(running)


def new_project(linear: FakeLinear, name: str) -> str:
    project = {"id": str(uuid.uuid4()), "name": name}
    linear.projects.append(project)
    return project["id"]


async def test_a_project_made_since_under_the_models_name_is_stale_with_both_shown(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI, linear: FakeLinear
) -> None:
    update = {"issue": "ENG-1", "project": "Checkout"}
    fake_model.script(Script(tool_calls=[call("linear_update_issue", update)]), Script(text="ok"))
    await bot.mention("C1", "put ENG-1 in the checkout project", fake_slack)
    await bot.idle()
    (card,) = fake_slack.cards("C1")
    assert "Checkout revamp" in card_text(card)  # the name matched a word of this project
    shown = linear.projects[0]["id"]
    other = new_project(linear, "Checkout")  # made between card and click
    await bot.click(card, cards.APPROVE, "UALICE", "C1")
    await bot.idle()
    (proposal,) = await proposals(bot)
    assert proposal.state.value == "failed"
    error = proposal.error or ""
    assert f"project now means 'Checkout' (id {other})" in error
    assert f"not 'Checkout revamp' (id {shown}) as shown on the card" in error
    assert mutations(linear) == []


async def test_a_second_project_under_the_shown_name_gets_nothing_the_shown_one_gets_the_write(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI, linear: FakeLinear
) -> None:
    create = {"team": "ENG", "title": "Refund flow", "project": "Checkout revamp"}
    fake_model.script(Script(tool_calls=[call("linear_create_issue", create)]), Script(text="ok"))
    await bot.mention("C1", "file the refund flow", fake_slack)
    await bot.idle()
    (card,) = fake_slack.cards("C1")
    shown = linear.projects[0]["id"]
    new_project(linear, "Checkout revamp")  # the same name, another project
    await bot.click(card, cards.APPROVE, "UALICE", "C1")
    await bot.idle()
    (proposal,) = await proposals(bot)
    assert proposal.state.value == "succeeded", proposal.error
    (sent,) = mutations(linear)
    assert sent["input"]["projectId"] == shown
    assert sent["input"]["teamId"] == linear.teams[0]["id"]


async def test_a_state_label_and_person_renamed_since_the_card_still_run_with_their_ids(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI, linear: FakeLinear
) -> None:
    update = {"issue": "ENG-1", "state": "Done", "labels": ["Bug"], "assignee": "dana"}
    fake_model.script(Script(tool_calls=[call("linear_update_issue", update)]), Script(text="ok"))
    await bot.mention("C1", "close ENG-1 as a bug for dana", fake_slack)
    await bot.idle()
    (card,) = fake_slack.cards("C1")
    done, bug, dana = linear.state("ENG", "Done"), linear.labels[0], linear.users[0]
    done["name"], bug["name"], dana["displayName"] = "Shipped", "Defect", "dana.s"
    await bot.click(card, cards.APPROVE, "UALICE", "C1")
    await bot.idle()
    (proposal,) = await proposals(bot)
    assert proposal.state.value == "succeeded", proposal.error
    (sent,) = mutations(linear)
    assert sent["input"] == {
        "stateId": done["id"],
        "assigneeId": dana["id"],
        "labelIds": [bug["id"]],
    }


async def test_an_edit_resolves_its_names_again_and_the_run_sends_the_new_ids(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI, linear: FakeLinear
) -> None:
    update = {"issue": "ENG-1", "project": "Checkout revamp"}
    fake_model.script(Script(tool_calls=[call("linear_update_issue", update)]), Script(text="ok"))
    await bot.mention("C1", "put ENG-1 in checkout", fake_slack)
    await bot.idle()
    payments = new_project(linear, "Payments")
    await bot.click(fake_slack.cards("C1")[0], cards.EDIT, "UALICE", "C1")
    await bot.idle()
    modal = fake_slack.views[-1]["view"]
    status, _ = await bot.submit_view(modal, "UALICE", {"issue": "ENG-1", "project": "Payments"})
    assert status == 200
    await bot.idle()
    (proposal,) = await proposals(bot)
    assert proposal.revision == 2
    assert (proposal.resolved or {})["project"]["id"] == payments
    card = fake_slack.cards("C1")[0]
    assert "Payments" in card_text(card)
    await bot.click(card, cards.APPROVE, "UALICE", "C1")
    await bot.idle()
    (proposal,) = await proposals(bot)
    assert proposal.state.value == "succeeded", proposal.error
    (sent,) = mutations(linear)
    assert sent["input"] == {"projectId": payments}
