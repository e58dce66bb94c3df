"""The built-in `slack` pack through the whole flow: reads run at once, writes wait for a click."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from sqlalchemy import select

from bot.db.models import Proposal
from bot.slack import cards
from tests.card_reading import card_fields
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack
from tests.harness import RunningBot
from tests.test_approvals_flow import call, card_text, tool_results


async def test_reads_run_at_once(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_slack.channel_info["CDEV"] = {
        "id": "CDEV",
        "name": "dev",
        "topic": {"value": "ship"},
        "purpose": {"value": "building"},
        "num_members": 9,
    }
    fake_slack.add_user_message("CDEV", "deploy at 5")
    fake_model.script(
        Script(
            tool_calls=[
                call("get_channel_info", {"channel": "CDEV"}, "a"),
                call("get_recent_messages", {"channel": "CDEV", "limit": 5}, "b"),
                call("lookup_user", {"user": None, "email": "dana@example.com"}, "c"),
            ]
        ),
        Script(text="Read it all."),
    )
    await bot.mention("C1", "what's up in #dev?", fake_slack)
    await bot.idle()
    info, recent, user = tool_results(fake_model)
    assert (info["name"], info["topic"], info["members"]) == ("dev", "ship", 9)
    assert recent["messages"][0]["text"] == "deploy at 5"
    assert user["id"] == "UDANA"
    assert fake_slack.cards("C1") == []


async def test_set_topic_previews_the_old_value_and_needs_a_confirmed_click(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_slack.channel_info["CDEV"] = {"id": "CDEV", "name": "dev", "topic": {"value": "ship"}}
    fake_model.script(
        Script(
            tool_calls=[call("set_channel_topic", {"channel": "CDEV", "topic": "release freeze"})]
        )
    )
    await bot.mention("C1", "set the #dev topic to release freeze", fake_slack)
    await bot.idle()
    (card,) = fake_slack.cards("C1")
    shown = card_text(card)
    assert "Set the topic of #dev" in shown
    assert card_fields(card)["Topic"] == "~ship~ → release freeze"
    approve = next(
        e
        for b in card.blocks or []
        if b["type"] == "actions"
        for e in b["elements"]
        if e["action_id"] == cards.APPROVE
    )
    assert approve["confirm"]["title"]["text"] == "Approve this action?"  # destructive
    assert fake_slack.channel_info["CDEV"]["topic"]["value"] == "ship"
    await bot.click(card, cards.APPROVE, "UALICE", "C1")
    await bot.idle()
    assert fake_slack.channel_info["CDEV"]["topic"]["value"] == "release freeze"


async def test_schedule_message_is_escaped_and_scheduled_after_approval(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    when = (datetime.now(UTC) + timedelta(hours=2)).replace(microsecond=0)
    fake_model.script(
        Script(
            tool_calls=[
                call(
                    "schedule_message",
                    {"channel": "CDEV", "text": "standup <!here>", "post_at": when.isoformat()},
                )
            ]
        )
    )
    await bot.mention("C1", "remind #dev about standup", fake_slack)
    await bot.idle()
    assert fake_slack.scheduled == []
    await bot.click(fake_slack.cards("C1")[0], cards.APPROVE, "UALICE", "C1")
    await bot.idle()
    (scheduled,) = fake_slack.scheduled
    assert scheduled["text"] == "standup &lt;!here&gt;"
    assert int(scheduled["post_at"]) == int(when.timestamp())
    assert json.dumps(fake_slack.cards("C1")[0].blocks).count("Message scheduled") == 1


async def test_the_live_reply_shows_what_is_being_looked_up(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_slack.delays["conversations.info"] = 1.5  # a slow lookup
    fake_model.script(
        Script(text="Let me look.", tool_calls=[call("get_channel_info", {"channel": "CDEV"})]),
        Script(text="It is #chan-cdev."),
    )
    await bot.mention("C1", "which channel is CDEV?", fake_slack)
    await bot.idle()
    (reply,) = fake_slack.bot_messages("C1")
    shown = fake_slack.history[reply.ts]
    assert any("_Looking at the channel…_" in text for text in shown)
    assert reply.text == "Let me look.\n\nIt is #chan-cdev."  # the status is gone at the end


async def test_a_private_channel_is_read_only_for_its_members(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """Mallory DMs the bot and asks for #exec's messages: the bot is in #exec, she is not."""
    fake_slack.channel_info["GEXEC"] = {"id": "GEXEC", "name": "exec", "is_private": True}
    fake_slack.members["GEXEC"] = ["UALICE", "UBOT"]
    fake_slack.add_user_message("GEXEC", "layoffs on friday")
    fake_model.script(
        Script(
            tool_calls=[
                call("get_recent_messages", {"channel": "GEXEC", "limit": 5}, "a"),
                call("get_channel_info", {"channel": "GEXEC"}, "b"),
            ]
        ),
        Script(text="I cannot read that."),
    )
    await bot.say(fake_slack, "D1", "what is said in GEXEC?", user="UMALLORY")
    await bot.idle()
    recent, info = tool_results(fake_model)
    assert recent["status"] == info["status"] == "error"
    assert "not a member" in recent["error"]
    assert "layoffs" not in json.dumps(fake_model.requests[-1].body)
    # Alice, a member, may.
    fake_model.script(
        Script(tool_calls=[call("get_recent_messages", {"channel": "GEXEC", "limit": 5})]),
        Script(text="Here."),
    )
    await bot.say(fake_slack, "D2", "what is said in GEXEC?", user="UALICE")
    await bot.idle()
    (recent,) = tool_results(fake_model)
    assert recent["messages"][0]["text"] == "layoffs on friday"


async def test_writes_need_the_requester_to_be_in_the_target_channel(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_slack.members["CANNOUNCE"] = ["UALICE", "UBOT"]
    fake_model.script(
        Script(tool_calls=[call("post_message", {"channel": "CANNOUNCE", "text": "hi all"})]),
        Script(text="I cannot post there for you."),
    )
    await bot.mention("C1", "announce hi all", fake_slack, user="UMALLORY")
    await bot.idle()
    assert fake_slack.cards("C1") == []  # never shown as a card
    (result,) = tool_results(fake_model)
    assert result["status"] == "error"
    assert "not a member" in result["error"]
    # A member who was there when the card was made but left before the click: the write is
    # checked again just before it runs.
    fake_model.script(
        Script(tool_calls=[call("post_message", {"channel": "CANNOUNCE", "text": "hi all"})]),
        Script(text="Failed."),
    )
    await bot.mention("C1", "announce hi all", fake_slack, user="UALICE")
    await bot.idle()
    (card,) = fake_slack.cards("C1")
    fake_slack.members["CANNOUNCE"] = ["UBOT"]
    await bot.click(card, cards.APPROVE, "UALICE", "C1")
    await bot.idle()
    assert fake_slack.bot_messages("CANNOUNCE") == []
    assert "not a member" in card_text(fake_slack.cards("C1")[0])


async def test_a_retried_post_does_not_post_twice(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(
        Script(tool_calls=[call("post_message", {"channel": "CDEV", "text": "ship it"})]),
        Script(text="Posted."),
    )
    await bot.mention("C1", "say ship it in dev", fake_slack)
    await bot.idle()
    await bot.click(fake_slack.cards("C1")[0], cards.APPROVE, "UALICE", "C1")
    await bot.idle()
    (proposal,) = [p for p in await bot_proposals(bot)]
    # Run the same approved attempt's tool again, as a retry after a lost outcome would.
    tool = bot.countersign.executor.registry.get("post_message")
    assert tool is not None
    ctx = bot.countersign.executor.context(proposal)
    again = await tool.run(tool.parse(proposal.approved_arguments or {}), ctx)
    posts = [m for m in fake_slack.bot_messages("CDEV") if m.text == "ship it"]
    assert len(posts) == 1
    assert again.result["ts"] == posts[0].ts


async def bot_proposals(bot: RunningBot) -> list[Proposal]:
    async with bot.countersign.db.transaction() as session:
        return list((await session.scalars(select(Proposal))).all())
