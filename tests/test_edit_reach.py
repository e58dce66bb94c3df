"""The typed Edit modal offers people and channels through Slack's own menus, which list only
what the person can see; but a submission is whatever was sent. A channel picked on the form
must be one the editor can read in Slack now (promise 5: nobody reaches beyond their reach), so
a forged `selected_conversation` naming a private channel they are not in changes nothing and
is refused on its field in words, and the card never names that channel."""

from __future__ import annotations

import json

import pytest

from bot.slack import cards
from bot.slack.edit_reach import NOT_YOURS, TOO_MANY
from tests.fakes.openai import FakeOpenAI
from tests.fakes.slack import BOT_USER_ID, TEAM_ID, FakeSlack
from tests.fakes.view_state import view_state
from tests.harness import RunningBot
from tests.test_approvals_flow import proposals
from tests.test_edit_modal_typed import PLAN, open_edit, submit, typed_bot

__all__ = ["typed_bot"]  # the fixture, shared with the Edit modal's own tests

SECRET = "GSECRET"
TEAM = "GTEAM"


@pytest.fixture(autouse=True)
def private_channels(fake_slack: FakeSlack) -> None:
    for channel, members in ((SECRET, ["UBOB"]), (TEAM, ["UALICE", "UBOB"])):
        fake_slack.channel_info[channel] = {
            "id": channel,
            "name": channel.lower()[1:],
            "is_private": True,
            "topic": {"value": ""},
            "purpose": {"value": ""},
        }
        fake_slack.members[channel] = [*members, BOT_USER_ID]


@pytest.mark.parametrize(
    ("field", "picked"),
    [("channel", SECRET), ("also_in", ["C2", SECRET])],
)
async def test_a_forged_pick_of_a_private_channel_the_editor_is_not_in_changes_nothing(
    typed_bot: RunningBot,
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    field: str,
    picked: str | list[str],
) -> None:
    view = await open_edit(typed_bot, fake_slack, fake_model)
    answer = await submit(typed_bot, view, {field: picked})
    assert answer.get("response_action") == "errors"
    assert answer["errors"] == {field: NOT_YOURS}
    (proposal,) = await proposals(typed_bot)
    assert (proposal.revision, proposal.arguments) == (1, PLAN)
    assert not any(SECRET in str(c.args) for c in fake_slack.calls_to("chat.update"))


async def test_a_private_channel_the_editor_is_in_may_be_picked(
    typed_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    view = await open_edit(typed_bot, fake_slack, fake_model)
    answer = await submit(typed_bot, view, {"channel": TEAM, "also_in": [TEAM, "C2"]})
    assert answer == {}
    (proposal,) = await proposals(typed_bot)
    assert (proposal.revision, proposal.arguments["channel"]) == (2, TEAM)
    assert proposal.arguments["also_in"] == [TEAM, "C2"]


async def test_a_channel_the_card_already_had_stays_whoever_edits(
    typed_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """Only what the editor picks is theirs to reach: a value the card showed is kept as it is
    (the requester's own pick, decided at the proposal), so editing another field still works."""
    fake_slack.members["C1"] = ["UBOB", BOT_USER_ID]  # Alice left #C1 since
    view = await open_edit(typed_bot, fake_slack, fake_model)
    answer = await submit(typed_bot, view, {"priority": "low"})
    assert answer == {}
    (proposal,) = await proposals(typed_bot)
    assert (proposal.revision, proposal.arguments["priority"]) == (2, "low")


async def test_a_modal_opened_before_another_edit_cannot_overwrite_it(
    typed_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """Two Edit modals open on one card: the first saved makes revision 2; the other, still
    showing revision 1, is refused on the form and changes nothing (the card changed)."""
    first = await open_edit(typed_bot, fake_slack, fake_model)
    (card,) = fake_slack.cards("C1")
    await typed_bot.click(card, cards.EDIT, "UALICE", "C1")
    await typed_bot.idle()
    second = fake_slack.views[-1]["view"]
    assert await submit(typed_bot, first, {"priority": "urgent", "channel": TEAM}) == {}
    answer = await submit(typed_bot, second, {"priority": "low", "channel": "C2"})
    assert answer.get("response_action") == "errors"
    assert "changed" in " ".join(answer["errors"].values())
    (proposal,) = await proposals(typed_bot)
    assert proposal.revision == 2
    assert (proposal.arguments["priority"], proposal.arguments["channel"]) == ("urgent", TEAM)


@pytest.mark.parametrize("dropped", ["size", "notes", "reviewer", "billable"])
async def test_a_submission_missing_a_block_of_the_form_changes_nothing(
    typed_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI, dropped: str
) -> None:
    """Slack sends the state of every input of the form (an empty one as null); a payload
    without one of them was not made by Slack from this form, and must not clear that field
    (an optional field left out would otherwise be emptied, or reset to its default)."""
    view = await open_edit(typed_bot, fake_slack, fake_model)
    state = view_state(view, {"priority": "low"})
    del state[dropped]
    status, answer = await typed_bot._interact(
        {
            "type": "view_submission",
            "user": {"id": "UALICE", "team_id": TEAM_ID},
            "trigger_id": "t",
            "view": {**view, "id": "V1", "state": {"values": state}},
        }
    )
    assert status == 200
    said = json.loads(answer) if answer.strip() else {}
    assert said.get("response_action") == "errors"
    (proposal,) = await proposals(typed_bot)
    assert (proposal.revision, proposal.arguments) == (1, PLAN)


async def test_a_forged_pick_of_very_many_channels_is_refused_without_asking_slack_of_each(
    typed_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """Each channel the editor adds is asked of Slack before the form is answered (within
    Slack's 3 seconds, on the workspace's rate budget): a crafted list of hundreds is refused
    in words, not checked one by one."""
    view = await open_edit(typed_bot, fake_slack, fake_model)
    before = len(fake_slack.calls_to("conversations.info"))
    many = [f"CMANY{n}" for n in range(300)]
    answer = await submit(typed_bot, view, {"also_in": many})
    assert answer["errors"] == {"also_in": TOO_MANY}
    assert len(fake_slack.calls_to("conversations.info")) - before <= 5
    (proposal,) = await proposals(typed_bot)
    assert (proposal.revision, proposal.arguments) == (1, PLAN)


async def test_a_guest_may_not_pick_a_public_channel_they_are_not_in(
    typed_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """Guests see only the channels they are in (public ones included), as in Slack."""
    fake_slack.users["UALICE"] = {"is_restricted": True}
    fake_slack.members["CLOBBY"] = ["UBOB", BOT_USER_ID]
    view = await open_edit(typed_bot, fake_slack, fake_model)
    answer = await submit(typed_bot, view, {"channel": "CLOBBY"})
    assert answer["errors"] == {"channel": NOT_YOURS}
    assert await submit(typed_bot, view, {"channel": "C2"}) == {}  # one she is in
    (proposal,) = await proposals(typed_bot)
    assert (proposal.revision, proposal.arguments["channel"]) == (2, "C2")
