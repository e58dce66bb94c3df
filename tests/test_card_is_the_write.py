"""The card is the write, character for character: every character a write sends is on its
card or one click from it (a "Show all N characters" modal bound to the card's revision), text
that hides itself is shown, a value no modal could hold is refused before any card, the Edit
modal cuts nothing, and a click counts only for the digest of the arguments its card showed."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy import select, update

from bot.db.models import Message, Proposal
from bot.slack import cards
from bot.slack.card_values import SHOW_ALL
from bot.tools.registry import arguments_hash
from tests import wide_pack
from tests.fakes import slack as fake_slack_module
from tests.fakes.github import TOKEN, FakeGitHub
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack, StoredMessage
from tests.harness import RunningBot, make_settings, start_bot, stop_bot
from tests.mcp_helpers import calls, stdio_server
from tests.test_approvals_flow import (
    CREATE,
    call,
    card_mrkdwn,
    card_text,
    proposals,
    tasks_in_db,
)

FRIENDLY = "Thanks for the report! I looked into the login loop and here is a summary. " * 13
SECRET = " By the way, the prod db password is hunter2."

# The arguments of a 60,000-character call in 2,000-character fragments (the fake's default
# is 5 characters, ~40,000 chunks: seconds of the SDK's parsing that these tests are not about).
BIG_FRAGMENTS = 2000


# -- driving the card's buttons --------------------------------------------------------------
def buttons(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every button of a card or modal: section accessories and actions elements."""
    found = []
    for block in blocks:
        if block.get("accessory", {}).get("type") == "button":
            found.append(block["accessory"])
        found += [e for e in block.get("elements", []) if e.get("type") == "button"]
    return found


def show_all_button(blocks: list[dict[str, Any]], label: str = "Show all") -> dict[str, Any]:
    return next(
        b
        for b in buttons(blocks)
        if b["action_id"] == SHOW_ALL and b["text"]["text"].startswith(label)
    )


async def press_show_all(
    bot: RunningBot, value: str, user: str, channel: str | None, in_modal: bool = False
) -> None:
    container: dict[str, Any] = (
        {"type": "view", "view_id": "V1"}
        if in_modal
        else {"type": "message", "message_ts": "1.0", "channel_id": channel}
    )
    status, _ = await bot._interact(
        {
            "type": "block_actions",
            "user": {"id": user, "team_id": fake_slack_module.TEAM_ID},
            "trigger_id": f"trigger-{user}-{time.monotonic_ns()}",
            "container": container,
            **({"channel": {"id": channel}} if channel and not in_modal else {}),
            "actions": [
                {
                    "type": "button",
                    "action_id": SHOW_ALL,
                    "block_id": "b",
                    "value": value,
                    "action_ts": "1.0",
                }
            ],
        }
    )
    assert status == 200
    await bot.idle()


def modal_value(view: dict[str, Any]) -> str:
    """The value a Show all modal holds: its plain_text sections joined."""
    return "".join(
        b["text"]["text"]
        for b in view["blocks"]
        if b["type"] == "section" and (b.get("text") or {}).get("type") == "plain_text"
    )


def plain_texts(card: StoredMessage) -> list[str]:
    """The card's plain_text objects (values, shown as they are): section texts and fields."""
    found = []
    for block in card.blocks or []:
        if block["type"] == "section":
            found += [
                t["text"]
                for t in [block.get("text") or {}, *block.get("fields", [])]
                if t.get("type") == "plain_text"
            ]
    return found


async def propose_task(
    bot: RunningBot, slack: FakeSlack, model: FakeOpenAI, **changes: Any
) -> StoredMessage:
    model.script(Script(tool_calls=[call("create_task", {**CREATE, **changes})]))
    await bot.mention("C1", "track it", slack)
    await bot.idle()
    (card,) = slack.cards("C1")
    return card


async def stored_tool_results(bot: RunningBot) -> list[dict[str, Any]]:
    async with bot.countersign.db.transaction() as session:
        found = await session.scalars(select(Message).where(Message.role == "tool"))
        return [json.loads(m.content or "null") for m in found.all()]


# -- hidden tails ----------------------------------------------------------------------------
async def test_a_hidden_tail_is_one_click_away_with_its_length_and_the_modal_holds_it_all(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    description = (FRIENDLY + SECRET)[:4000]
    assert description.endswith("hunter2.")
    assert len(description) < 4000
    card = await propose_task(bot, fake_slack, fake_model, description=description)
    shown = card_text(card)
    assert "hunter2" not in shown  # too long for the card: its start is shown ...
    assert f"{len(description):,} characters" in shown  # ... with its total length ...
    button = show_all_button(card.blocks or [])
    assert button["text"]["text"] == f"Show all {len(description):,} characters"
    assert "hunter2" not in button["value"]
    assert len(button["value"]) < 60
    await press_show_all(bot, button["value"], "UBOB", "C1")
    (opened,) = fake_slack.views
    assert opened["trigger_id"].startswith("trigger-UBOB")
    assert modal_value(opened["view"]) == description  # ... and every character one click away
    assert f"{len(description):,} characters" in json.dumps(opened["view"])
    await bot.click(card, cards.APPROVE, "UALICE", "C1")
    await bot.idle()
    (task,) = await tasks_in_db(bot)
    assert task.description == description


async def test_every_argument_sent_is_on_the_card_not_only_the_summary(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    card = await propose_task(bot, fake_slack, fake_model)
    (proposal,) = await proposals(bot)
    values = plain_texts(card)
    for name in ("title", "description", "priority"):
        assert proposal.arguments[name] in values, name  # each argument as a value of its own
    shown = card_text(card)
    assert "@udana" in shown  # the assignee by name, the due date in words
    assert "Fri 27 Nov 2026" in shown
    assert f"digest `{proposal.arguments_hash[:10]}`" in shown


# -- a 60,000-character GitHub comment --------------------------------------------------------
@pytest.fixture
def fake_github() -> Iterator[FakeGitHub]:
    github = FakeGitHub().start()
    github.add_issue("acme/api", 7, "Login loops", labels=["bug"], assignees=["dana"])
    yield github
    github.stop()


@pytest.fixture
async def gh_bot(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, fake_github: FakeGitHub, sqlite_url: str
) -> AsyncIterator[RunningBot]:
    running = await start_bot(
        make_settings(
            fake_slack,
            fake_model,
            sqlite_url,
            github_token=TOKEN,
            github_api_url=fake_github.api_url,
            github_repos=["acme/*"],
        )
    )
    yield running
    await stop_bot(running)


async def test_a_60000_character_github_comment_is_approvable_and_fully_readable(
    gh_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI, fake_github: FakeGitHub
) -> None:
    body = (FRIENDLY * 70)[: 60_000 - len(SECRET)] + SECRET
    assert len(body) == 60_000
    fake_model.script(
        Script(
            tool_calls=[call("github_comment", {"repo": "acme/api", "number": 7, "body": body})],
            argument_fragment_size=BIG_FRAGMENTS,
        ),
        Script(text="Commented."),
    )
    await gh_bot.mention("C1", "answer the reporter", fake_slack)
    await gh_bot.idle()
    (card,) = fake_slack.cards("C1")  # the fake refuses cards over Block Kit's limits
    assert "hunter2" not in card_text(card)
    assert "60,000 characters" in card_text(card)
    # Its start once (under "Comment", the preview's word), not repeated as a summary.
    assert sum(FRIENDLY[:60] in json.dumps(b) for b in card.blocks or []) == 1
    await press_show_all(gh_bot, show_all_button(card.blocks or [])["value"], "UALICE", "C1")
    (opened,) = fake_slack.views
    assert len(opened["view"]["blocks"]) <= 100  # the fake also checks every block's limits
    assert modal_value(opened["view"]) == body
    await gh_bot.click(card, cards.APPROVE, "UALICE", "C1")
    await gh_bot.idle()
    (posted,) = [w.body["body"] for w in fake_github.writes() if w.method == "POST"]
    (proposal,) = await proposals(gh_bot)
    # Exactly the approved text, plus the invisible marker a retry looks for.
    assert posted == f"{body}\n\n<!-- countersign:{proposal.idempotency_key} -->"


async def test_a_value_no_modal_could_hold_is_refused_before_any_card(
    gh_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI, fake_github: FakeGitHub
) -> None:
    """60,000 characters, but 40,000 of them zero-width: shown as codes, more than a modal's
    100 blocks hold. The model is told why; nothing is proposed or shown."""
    body = "Looks good to me." + "\u200b" * 40_000
    fake_model.script(
        Script(
            tool_calls=[call("github_comment", {"repo": "acme/api", "number": 7, "body": body})],
            argument_fragment_size=BIG_FRAGMENTS,
        ),
        Script(text="It was too long."),
    )
    await gh_bot.mention("C1", "answer the reporter", fake_slack)
    await gh_bot.idle()
    assert fake_slack.cards("C1") == []
    assert await proposals(gh_bot) == []
    (result,) = await stored_tool_results(gh_bot)  # the long call was summarised for the model
    assert result["status"] == "invalid_arguments"
    assert "more than an approver can be shown" in result["error"]
    assert [w for w in fake_github.writes() if w.method == "POST"] == []


# -- text that hides itself ---------------------------------------------------------------------
async def test_invisible_and_direction_changing_characters_are_shown_as_codes(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    title = "Pay invoice\u202e0001 ot\u202c to ACME\u200b\u2066x\u2069\ufeff"
    card = await propose_task(bot, fake_slack, fake_model, title=title)
    shown = card_text(card)
    for code in ("[U+202E]", "[U+202C]", "[U+200B]", "[U+2066]", "[U+2069]", "[U+FEFF]"):
        assert code in shown
    for raw in "\u202e\u202c\u200b\u2066\u2069\ufeff":
        assert raw not in shown  # nowhere on the card does a hidden character act
    assert "direction override" in shown


async def test_a_lying_link_shows_its_real_target(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    description = (
        "See [https://github.com/acme/api/pull/7](https://evil.example/steal?t=1) and "
        "<https://phish.example/x|docs.acme.com>."
    )
    card = await propose_task(bot, fake_slack, fake_model, description=description)
    shown = card_text(card).replace("\u200b", "")  # every character, none of it a link
    assert "goes to https://evil.example/steal?t=1" in shown
    assert "WARNING: the text names github.com" in shown
    assert "goes to https://phish.example/x" in shown
    assert "WARNING: the text names docs.acme.com" in shown


async def test_mentions_in_a_value_say_what_they_will_do_at_the_destination(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(
        Script(
            tool_calls=[
                call("set_channel_topic", {"channel": "CGENERAL", "topic": "<!channel> lunch"}),
                call("post_message", {"channel": "CGENERAL", "text": "<!here> and @channel"}, "c2"),
            ]
        )
    )
    await bot.mention("C1", "set the topic and tell everyone", fake_slack)
    await bot.idle()
    topic, post = fake_slack.cards("C1")
    assert "&lt;!channel&gt; notifies everyone in the channel" in card_mrkdwn(topic)
    assert "&lt;!here&gt; is shown as typed and notifies nobody" in card_mrkdwn(post)
    assert "@channel is plain text and notifies nobody" in card_mrkdwn(post)
    for card in (topic, post):  # the card itself pings nobody
        assert "<!channel>" not in card_mrkdwn(card)
        assert "<!here>" not in card_mrkdwn(card)


async def test_an_mcp_write_shows_its_whole_argument_and_mentions_for_an_unknown_destination(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, tmp_path: Path
) -> None:
    """An MCP server is a destination we do not know: its card says what a mention would do if
    the text reached Slack, and the server gets exactly the text the Show all modal held."""
    log = tmp_path / "notes.jsonl"
    servers = {"notes": stdio_server(log)}
    bot = await start_bot(
        make_settings(fake_slack, fake_model, sqlite_url, mcp_servers={"mcpServers": servers})
    )
    body = FRIENDLY * 3 + "<!channel> " + SECRET
    try:
        fake_model.script(
            Script(tool_calls=[call("notes__add_note", {"title": "Standup", "body": body})]),
            Script(text="Added."),
        )
        await bot.mention("C1", "note it", fake_slack)
        await bot.idle()
        (card,) = fake_slack.cards("C1")
        assert "hunter2" not in card_text(card)
        assert "notifies everyone in the channel if this text reaches Slack" in card_text(card)
        await press_show_all(bot, show_all_button(card.blocks or [])["value"], "UBOB", "C1")
        assert modal_value(fake_slack.views[0]["view"]) == body
        await bot.click(card, cards.APPROVE, "UALICE", "C1")
        await bot.idle()
        (sent,) = calls(log, "add_note")
        assert sent["arguments"]["body"] == body
    finally:
        await stop_bot(bot)


# -- Show all: bound to the card's revision, only for people who may read it -------------------
async def test_a_show_all_click_on_an_older_revision_opens_nothing(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    card = await propose_task(bot, fake_slack, fake_model, description="x" * 3000)
    old = show_all_button(card.blocks or [])["value"]
    (proposal,) = await proposals(bot)
    edited = {**proposal.arguments, "description": "y" * 3000}
    registry_tool = bot.countersign.executor.registry.get("create_task")
    assert registry_tool is not None
    assert registry_tool.preview is not None
    preview = await registry_tool.preview(
        registry_tool.parse(edited), bot.countersign.executor.context(proposal)
    )
    await bot.countersign.approvals.edit(proposal.id, "UALICE", edited, preview, 1)
    await press_show_all(bot, old, "UBOB", "C1")
    assert fake_slack.views == []
    assert "card changed" in fake_slack.ephemerals_for("UBOB")[-1]


async def test_show_all_is_only_for_people_who_can_read_the_cards_channel(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_slack.channel_info["C1"] = {"id": "C1", "name": "secret", "is_private": True}
    fake_slack.members["C1"] = ["UALICE", "UBOB", "UBOT"]
    card = await propose_task(bot, fake_slack, fake_model, description="z" * 3000)
    value = show_all_button(card.blocks or [])["value"]
    await press_show_all(bot, value, "UMALLORY", "C1")
    assert fake_slack.views == []
    assert "can read this card's channel" in fake_slack.ephemerals_for("UMALLORY")[-1]
    await press_show_all(bot, value, "UBOB", "C1")
    assert modal_value(fake_slack.views[0]["view"]) == "z" * 3000


@pytest.fixture
async def wide_bot(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> AsyncIterator[RunningBot]:
    packs = ["bot.tools.packs.tasks", "tests.wide_pack"]
    running = await start_bot(make_settings(fake_slack, fake_model, sqlite_url, tool_packs=packs))
    yield running
    await stop_bot(running)


async def test_more_fields_open_the_rest_the_same_way(
    wide_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    values = {name: f"{name}: " + name * 5 for name in wide_pack.FIELDS}
    values["f16"] = "tail " + "w" * 3995 + " hunter2"
    fake_model.script(Script(tool_calls=[call("wide_form", values)]), Script(text="Filled."))
    await wide_bot.mention("C1", "fill the form", fake_slack)
    await wide_bot.idle()
    (card,) = fake_slack.cards("C1")
    shown = card_text(card)
    assert all(values[name] in shown for name in wide_pack.FIELDS[:15])  # what is sent first
    assert "Setting 01" not in shown  # what the preview only says, after it
    assert "hunter2" not in shown
    more = show_all_button(card.blocks or [], "…and")
    assert more["text"]["text"] == "…and 25 more fields"  # the 25 preview fields
    await press_show_all(wide_bot, more["value"], "UBOB", "C1")
    (opened,) = fake_slack.views
    modal = json.dumps(opened["view"], ensure_ascii=False)
    for name in ("Setting 01", "Setting 21", "Setting 25", "value 25"):
        assert name in modal
    await press_show_all(wide_bot, show_all_button(card.blocks or [])["value"], "UBOB", "C1")
    assert modal_value(fake_slack.views[-1]["view"]) == values["f16"]  # all of it, one click
    await wide_bot.click(card, cards.APPROVE, "UALICE", "C1")
    await wide_bot.idle()
    assert wide_pack.SENT[-1] == values


@pytest.mark.parametrize(
    "value", ["1:1:zz:a0", "1:1", "1:1:0123456789:a999", "1:1:0123456789:b1", "x", "1:1:ab:a0:a1"]
)
async def test_crafted_show_all_values_open_nothing(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI, value: str
) -> None:
    await propose_task(bot, fake_slack, fake_model, description="q" * 3000)
    await press_show_all(bot, value, "UBOB", "C1")
    assert fake_slack.views == []


# -- the Edit modal -----------------------------------------------------------------------------
def edit_inputs(view: dict[str, Any]) -> dict[str, str]:
    """The text inputs of the Edit modal and what they show (people, dates and choices have
    pickers and menus, which send back what they show unless a person changes them)."""
    return {
        b["block_id"]: b["element"].get("initial_value", "")
        for b in view["blocks"]
        if b["type"] == "input" and b["element"]["type"] == "plain_text_input"
    }


async def test_a_long_field_is_edited_in_parts_and_nothing_is_cut(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    description = "a" * 2999 + "🙂" + "b" * 998  # the emoji counts twice in Slack's limit
    card = await propose_task(bot, fake_slack, fake_model, description=description)
    await bot.click(card, cards.EDIT, "UALICE", "C1")
    await bot.idle()
    (opened,) = fake_slack.views
    inputs = edit_inputs(opened["view"])
    assert inputs["description"] + inputs["description::2"] == description
    assert inputs["description"] == "a" * 2999  # the fake refuses inputs over 3,000 units
    typed = {**inputs, "description::2": "🙂" + "b" * 990 + " hunter3"}
    status, answer = await bot.submit_view(opened["view"], "UALICE", typed)
    assert status == 200
    assert answer in ("", "{}"), answer
    await bot.idle()
    (proposal,) = await proposals(bot)
    assert proposal.revision == 2
    assert proposal.arguments["description"] == "a" * 2999 + "🙂" + "b" * 990 + " hunter3"


async def test_an_unchanged_field_stays_byte_identical_after_another_is_edited(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    description = ("Steps:  \r\n1. open  \n2. loop\u200b" + " pad" * 900)[:3500]
    card = await propose_task(bot, fake_slack, fake_model, description=description)
    (before,) = await proposals(bot)
    await bot.click(card, cards.EDIT, "UALICE", "C1")
    await bot.idle()
    (opened,) = fake_slack.views
    inputs = edit_inputs(opened["view"])
    # Slack sends back what the inputs hold, line ends and trailing blanks normalised.
    typed = {
        block: "\n".join(line.rstrip() for line in text.replace("\r\n", "\n").split("\n"))
        for block, text in inputs.items()
    }
    typed["title"] = "Fix the login loop"
    status, answer = await bot.submit_view(opened["view"], "UALICE", typed)
    assert status == 200
    assert answer in ("", "{}"), answer
    await bot.idle()
    (after,) = await proposals(bot)
    assert after.revision == 2
    assert after.arguments["title"] == "Fix the login loop"
    assert after.arguments["description"] == before.arguments["description"]


# -- the digest ------------------------------------------------------------------------------
async def test_a_click_on_a_card_whose_arguments_were_swapped_underneath_counts_for_nothing(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """The stored arguments are rewritten (hash and all) after the card was shown, at the same
    revision: the card's buttons carry the digest it showed, so the click approves nothing."""
    card = await propose_task(bot, fake_slack, fake_model)
    (proposal,) = await proposals(bot)
    forged = {**proposal.arguments, "title": "Delete prod database"}
    async with bot.countersign.db.transaction() as session:
        await session.execute(
            update(Proposal).values(arguments=forged, arguments_hash=arguments_hash(forged))
        )
    await bot.click(card, cards.APPROVE, "UALICE", "C1")
    await bot.idle()
    (after,) = await proposals(bot)
    assert after.state.value == "proposed"
    assert after.approved_arguments is None
    assert "card changed" in fake_slack.ephemerals_for("UALICE")[-1]
    assert await tasks_in_db(bot) == []


async def test_arguments_tampered_after_approval_are_refused_by_the_executor(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    await propose_task(bot, fake_slack, fake_model)
    (proposal,) = await proposals(bot)
    approvals = bot.countersign.approvals
    digest = proposal.arguments_hash[:10]
    await approvals.vote(proposal.id, proposal.revision, "UALICE", 1, digest=digest)
    forged = {**proposal.arguments, "title": "Delete prod database"}
    async with bot.countersign.db.transaction() as session:
        await session.execute(update(Proposal).values(approved_arguments=forged))
    settled = await bot.countersign.executor.run(proposal.id)
    assert settled is not None
    assert settled.state.value == "failed"
    assert "differ from the approved revision" in (settled.error or "")
    assert await tasks_in_db(bot) == []
    await bot.idle()


# -- each write is capped at its destination's own limits ---------------------------------------
async def test_slack_writes_are_capped_at_slacks_own_limits_as_sent(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """A message is measured as it will be sent (escaped): 1,100 characters of `<` become
    4,400, over what chat.postMessage takes, so it is refused before any card; 3,900 plain
    characters fit and are posted whole; a topic over 250 characters is refused."""
    fake_model.script(
        Script(
            tool_calls=[
                call("post_message", {"channel": "CGENERAL", "text": "<" * 1000 + "x" * 100}),
                call("set_channel_topic", {"channel": "CGENERAL", "topic": "t" * 251}, "c2"),
                call("post_message", {"channel": "CGENERAL", "text": "y" * 3900}, "c3"),
            ]
        ),
        Script(text="One of three."),
    )
    await bot.mention("C1", "post these", fake_slack)
    await bot.idle()
    results = await stored_tool_results(bot)
    assert [r["status"] for r in results[:2]] == ["invalid_arguments", "invalid_arguments"]
    assert "Slack takes at most 4000" in results[0]["error"]
    (card,) = fake_slack.cards("C1")
    await bot.click(card, cards.APPROVE, "UALICE", "C1")
    await bot.idle()
    (posted,) = fake_slack.thread("CGENERAL")
    assert posted.text == "y" * 3900


# -- the fake holds the bot to Block Kit's real limits ------------------------------------------
async def test_the_fake_slack_refuses_modals_beyond_block_kits_limits(
    fake_slack: FakeSlack,
) -> None:
    client = AsyncWebClient(token=fake_slack_module.BOT_TOKEN, base_url=fake_slack.api_url)
    section = {"type": "section", "text": {"type": "plain_text", "text": "x"}}
    modal = {"type": "modal", "title": {"type": "plain_text", "text": "t"}, "blocks": []}
    cases = [
        ("", {**modal, "blocks": [section]}),  # no trigger id
        ("t1", {**modal, "blocks": [section] * 101}),  # over 100 blocks
        (
            "t1",
            {**modal, "blocks": [{**section, "text": {"type": "plain_text", "text": "x" * 3001}}]},
        ),
    ]
    for trigger, view in cases:
        with pytest.raises(SlackApiError):
            await client.views_open(trigger_id=trigger, view=view)
    with pytest.raises(SlackApiError):
        await client.chat_postMessage(channel="C1", text="t", blocks=[section] * 51)
    await client.views_open(trigger_id="t1", view={**modal, "blocks": [section] * 100})
