"""The poster (issue 25, "One way to post"): every message states what it carries and where it
goes, and one whose audience the destination's readers may not all read is refused before
Slack hears of it, whoever asks. The real slack_sdk client against the fake Slack: a public
channel C1, the private GEXEC (Alice, Carol and the bot), Bob outside it."""

from __future__ import annotations

import asyncio
import logging

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.audience import channel, narrowest
from bot.poster import NOTHING_PRIVATE, ApprovedWrite, Poster, PostRefused
from bot.slack import cards
from bot.slack.budgets import Limits, WorkspaceBudgets
from bot.slack.edit_budget import EditBudget
from bot.slack.native_reply import WITHHELD, NativeOptions
from bot.slack.streamer import ReplyStream
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import BOT_TOKEN, FakeSlack, wait_until
from tests.harness import RunningBot
from tests.test_approvals_flow import call
from tests.test_audience import SECRET, private_exec, read_exec
from tests.test_private_notes import shown_in

EXEC = channel("GEXEC")
FROM_EXEC = narrowest(channel("C1"), EXEC)  # what a turn in C1 that read #exec carries
SHOWN = "Here is what"
LOOKUPS = ("conversations.info", "conversations.members", "users.info", "auth.test")


@pytest.fixture
def slack(fake_slack: FakeSlack) -> AsyncWebClient:
    private_exec(fake_slack)
    fake_slack.members["GEXEC"] = ["UALICE", "UCAROL", "UBOT"]
    return AsyncWebClient(token=BOT_TOKEN, base_url=fake_slack.api_url)


def lookups(fake: FakeSlack) -> int:
    return sum(len(fake.calls_to(m)) for m in LOOKUPS)


async def test_private_data_is_refused_where_not_all_may_read_it(
    slack: AsyncWebClient, fake_slack: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    poster = Poster(slack)
    caplog.set_level(logging.INFO, logger="bot.poster")
    with pytest.raises(PostRefused):
        await poster.post("C1", f"In #exec: {SECRET}", carries=FROM_EXEC)
    with pytest.raises(PostRefused):
        await poster.update("C1", "1.0", SECRET, carries=FROM_EXEC)
    with pytest.raises(PostRefused):  # a DM is its one person's: Bob may not read #exec
        await poster.post("DBOB", SECRET, carries=FROM_EXEC, reader="UBOB")
    assert fake_slack.calls_to("chat.postMessage") == []
    assert fake_slack.calls_to("chat.update") == []
    assert "refused a post to C1" in caplog.text
    assert SECRET not in caplog.text  # the log names the place and the audience, not the text

    await poster.post("GEXEC", SECRET, carries=EXEC)  # its own channel's data
    await poster.post("C1", "Done.", carries=NOTHING_PRIVATE)
    await poster.post("C1", "Public.", carries=narrowest(channel("C1"), channel("C2")))
    dm = str((await slack.conversations_open(users="UCAROL"))["channel"]["id"])
    await poster.post(dm, SECRET, carries=FROM_EXEC)  # Carol's DM, named by Slack, not told
    assert [m.text for m in fake_slack.bot_messages("GEXEC")] == [SECRET]
    assert [m.text for m in fake_slack.bot_messages(dm)] == [SECRET]
    assert SECRET not in shown_in(fake_slack, "C1")


async def test_an_ephemeral_message_is_checked_against_its_one_recipient(
    slack: AsyncWebClient, fake_slack: FakeSlack
) -> None:
    poster = Poster(slack)
    await poster.ephemeral("C1", "UALICE", SECRET, carries=FROM_EXEC)
    with pytest.raises(PostRefused):
        await poster.ephemeral("C1", "UBOB", SECRET, carries=FROM_EXEC)
    assert [e["user"] for e in fake_slack.ephemerals] == ["UALICE"]


async def test_only_a_named_approval_sends_data_wider_and_it_is_logged(
    slack: AsyncWebClient, fake_slack: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    poster = Poster(slack)
    caplog.set_level(logging.INFO, logger="bot.poster")
    with pytest.raises(PostRefused):
        await poster.post("C1", SECRET, carries=FROM_EXEC, approved=ApprovedWrite(""))
    await poster.post("C1", SECRET, carries=FROM_EXEC, approved=ApprovedWrite("key-1"))
    assert [m.text for m in fake_slack.bot_messages("C1")] == [SECRET]
    assert "under approval key-1" in caplog.text
    assert SECRET not in caplog.text


async def test_nothing_the_poster_sends_pings_a_channel(
    slack: AsyncWebClient, fake_slack: FakeSlack
) -> None:
    poster = Poster(slack)
    pings = "<!channel> <!here|here> <!everyone> <!subteam^S1|@team> <@UBOB> <!date^1|d>"
    posted = await poster.post(
        "C1",
        pings,
        carries=NOTHING_PRIVATE,
        blocks=[{"type": "section", "text": {"type": "mrkdwn", "text": pings}}],
    )
    (message,) = fake_slack.bot_messages("C1")
    for shown in (message.text, str(message.blocks)):
        for ping in ("<!channel>", "<!here", "<!everyone>", "<!subteam"):
            assert ping not in shown
        assert "<@UBOB>" in shown  # the bot's notes name people on purpose
        assert "<!date^1|d>" in shown
    await poster.update("C1", str(posted["ts"]), "<!here>", carries=NOTHING_PRIVATE)
    assert fake_slack.bot_messages("C1")[0].text == "&lt;!here&gt;"


async def test_a_live_reply_decides_once_not_per_edit(
    slack: AsyncWebClient, fake_slack: FakeSlack
) -> None:
    budget = EditBudget(600, window_seconds=1.0)
    stream = ReplyStream(slack, budget, "C1", "1.0", min_interval=0.0)
    stream.carry(narrowest(channel("C1"), channel("C2")))  # C2 is public: asked once
    await stream.start()
    stream.append("a")
    assert await stream.outlet.cleared(stream.carries)
    before = lookups(fake_slack)
    for word in " b c d e f g":
        stream.append(word)
        await stream.outlet.update(stream.message_ts[0], stream.source, carries=stream.carries)
    await stream.finish()
    assert lookups(fake_slack) == before
    assert fake_slack.history[stream.message_ts[0]][-1] == "a b c d e f g"
    await budget.stop()


@pytest.mark.parametrize("native", [False, True])
async def test_a_live_reply_the_poster_refuses_ends_with_a_note_not_the_text(
    slack: AsyncWebClient, fake_slack: FakeSlack, native: bool
) -> None:
    """Should a reply ever carry what its thread may not read (the turn sends such text
    privately, so this is the last guard), it ends showing a plain note: a native stream is
    stopped and replaced, and its stream start is given back."""
    budgets = WorkspaceBudgets(Limits())
    options = NativeOptions(budgets.appends, budgets.streams, "UALICE", "T0TEST", patience=5.0)
    root = fake_slack.add_user_message("C1", "what is new?")
    stream = ReplyStream(
        slack, budgets.edits, "C1", root, min_interval=0.0, native=options if native else None
    )
    await stream.start()
    stream.append("Here is what I found, ")
    await wait_until(lambda: any(SHOWN in t for t in fake_slack.history[stream.message_ts[0]]))
    stream.carry(EXEC)
    stream.append(f"in #exec: {SECRET}")
    await asyncio.wait_for(stream.finish(), 10)
    assert stream.withheld
    (ts,) = stream.message_ts
    assert fake_slack.history[ts][-1] == WITHHELD
    assert SECRET not in shown_in(fake_slack, "C1")
    assert budgets.streams.open_streams == 0
    assert bool(fake_slack.calls_to("chat.stopStream")) is native
    await budgets.stop()


async def test_an_approved_post_sends_what_its_card_showed_where_it_showed(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """The slack pack's own write is the one named exception: Alice read #exec and asked to
    post it in #dev; the card went to her alone, she approved exactly that, and it is sent."""
    private_exec(fake_slack)
    fake_model.script(
        Script(tool_calls=[read_exec()]),
        Script(tool_calls=[call("post_message", {"channel": "CDEV", "text": SECRET}, "w1")]),
        Script(text="Posted."),
    )
    await bot.mention("C1", "post what GEXEC says in CDEV", fake_slack)
    await bot.idle()
    assert fake_slack.bot_messages("CDEV") == []
    (card,) = fake_slack.cards("DALICE")
    assert await bot.click(card, cards.APPROVE, "UALICE", "DALICE") == 200
    await bot.idle()
    assert [m.text for m in fake_slack.bot_messages("CDEV")] == [SECRET]
    assert SECRET not in shown_in(fake_slack, "C1")
