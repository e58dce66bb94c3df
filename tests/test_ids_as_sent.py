"""A value is read as a person or a channel only when it is exactly a Slack id: "UBOB\n" (a
final newline that Python's `$` lets through a schema's pattern) is not @bob on the card, nor
`<#C1\n>`, and a forged Edit pick in that shape is refused on its field."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from bot.db.models import Task
from bot.slack import cards
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack
from tests.harness import RunningBot, make_settings, start_bot, stop_bot
from tests.test_approvals_flow import call, proposals
from tests.test_card_fields_once import propose as card_fields_propose
from tests.test_card_fields_once import texts
from tests.test_edit_modal_typed import PLAN, open_edit, submit, typed_bot

__all__ = ["typed_bot"]  # the fixture of the Edit modal tests


@pytest.fixture
async def loose_bot(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> AsyncIterator[RunningBot]:
    packs = ["tests.loose_ids_pack"]
    running = await start_bot(make_settings(fake_slack, fake_model, sqlite_url, tool_packs=packs))
    yield running
    await stop_bot(running)


def card_text(slack: FakeSlack) -> str:
    (card,) = slack.cards("C1")
    return json.dumps(card.blocks)


async def propose(
    bot: RunningBot, slack: FakeSlack, model: FakeOpenAI, args: dict[str, Any]
) -> None:
    model.script(Script(tool_calls=[call("hand_over", args)]))
    await bot.mention("C1", "hand the SSO work to Bob", slack)
    await bot.idle()


async def test_an_id_with_a_final_newline_is_not_shown_as_the_person_or_channel(
    loose_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    await propose(loose_bot, fake_slack, fake_model, {"owner": "UBOB\n", "channel": "CDESIGN\n"})
    shown = card_text(fake_slack)
    assert "@ubob" not in shown
    assert "<#CDESIGN" not in shown


async def test_exact_ids_still_read_as_the_person_and_channel(
    loose_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    await propose(loose_bot, fake_slack, fake_model, {"owner": "UBOB", "channel": "CDESIGN"})
    shown = card_text(fake_slack)
    assert "@ubob" in shown
    assert "<#CDESIGN>" in shown


@pytest.mark.parametrize(("field", "forged"), [("owner", "UDANA\n"), ("channel", "CDESIGN\n")])
async def test_a_forged_pick_with_a_final_newline_is_refused(
    loose_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI, field: str, forged: str
) -> None:
    await propose(loose_bot, fake_slack, fake_model, {"owner": "UBOB", "channel": "C1"})
    (card,) = fake_slack.cards("C1")
    await loose_bot.click(card, cards.EDIT, "UALICE", "C1")
    await loose_bot.idle()
    view = fake_slack.views[-1]["view"]
    status, answer = await loose_bot.submit_view(view, "UALICE", {field: forged})
    assert status == 200
    said = json.loads(answer)
    assert said.get("response_action") == "errors"
    assert field in said["errors"]
    (proposal,) = await proposals(loose_bot)
    assert (proposal.revision, proposal.arguments[field]) == (
        1,
        {"owner": "UBOB", "channel": "C1"}[field],
    )


async def test_a_persons_name_reads_on_one_line_and_pings_nobody(
    loose_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """A name is Slack's profile text, not the bot's: on the card it stays one line (it cannot
    pass for another field under its own label), inert and with hidden characters as codes."""
    fake_slack.users["UBOB"] = {
        "real_name": "Bob",
        "profile": {"display_name": "bob <!channel>\n*Channel*\n#general\u202e", "title": ""},
    }
    await propose(loose_bot, fake_slack, fake_model, {"owner": "UBOB", "channel": "CDESIGN"})
    (card,) = fake_slack.cards("C1")
    fields = [f["text"] for b in card.blocks or [] for f in b.get("fields") or []]
    owner = fields[fields.index("*Owner*") + 1]
    assert owner.startswith("@bob")
    assert "\n" not in owner
    assert "<!channel>" not in owner
    assert "[U+202E]" in owner


async def test_an_old_value_with_line_breaks_cannot_pass_for_another_field(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """The target's current state is anyone's text (a task's description a teammate wrote):
    shown as the old value it stays within its own field, on one line, struck through."""
    async with bot.countersign.db.transaction() as session:
        session.add(
            Task(
                team_id="T0TEST",
                title="Ship SSO",
                description="Fine as is\n*Assignee*\n@ceo\n*Due date*\nTomorrow",
                created_by="UALICE",
            )
        )
    card = await card_fields_propose(
        bot, fake_slack, fake_model, "update_task", {"task_id": 1, "description": "Ship it"}
    )
    label = next(t for t in texts(card) if t.startswith("*Description*"))
    old = label.split("\n", 1)[1]
    assert old.startswith("~Fine as is")
    assert old.endswith("~ →")
    assert "\n" not in old
    assert "Fine as is ↵ *Assignee* ↵ @ceo" in old


@pytest.mark.parametrize("moment", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"])
async def test_a_date_time_at_the_edge_of_the_calendar_is_shown_as_sent_and_editable(
    typed_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI, moment: str
) -> None:
    """A moment whose UTC time falls outside Python's calendar (year 1 at +14:00) is valid for
    the schema; the card shows it as sent (no Slack date token can hold it) instead of failing,
    and the Edit modal opens on it."""
    view = await open_edit(typed_bot, fake_slack, fake_model, {**PLAN, "starts_at": moment})
    (card,) = fake_slack.cards("C1")
    assert moment in json.dumps(card.blocks)
    assert view["callback_id"] == cards.EDIT_MODAL
    assert await submit(typed_bot, view, {"priority": "low"}) == {}
    (proposal,) = await proposals(typed_bot)
    assert (proposal.revision, proposal.arguments["starts_at"]) == (2, moment)
