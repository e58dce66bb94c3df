"""Promise 7 through the front door: an outcome is never reported wrongly.

A write whose answer is lost (Slack did it, the connection dropped before its answer came back)
or that ran out of time after sending is `unknown`: the card says it may have happened and
what to check, the model is told `unknown`, and Retry first looks for the earlier write (and
finds it however busy the channel became since) or, for a tool that cannot look, runs only
after its clicker confirmed that it may write twice.

This module is also a tool pack (`TOOLS`): a team's own write tool that cannot look for its
earlier writes.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import httpx
import httpx2
import pytest
from pydantic import BaseModel
from slack_sdk.errors import SlackApiError
from slack_sdk.web.slack_response import SlackResponse

from bot.approvals.outcomes import outcome_unknown
from bot.slack import cards
from bot.tools.registry import (
    Change,
    Outcome,
    OutcomeUnknown,
    Preview,
    ToolContext,
    ToolError,
    write_tool,
)
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack, StoredMessage
from tests.harness import RunningBot, make_settings, start_bot, stop_bot
from tests.test_approvals_flow import audit, call, card_text, proposals, tool_results

PACK = "fax"
SENT: list[str] = []  # what the fax "service" received, one entry per page sent
SLOW = [True]


class Fax(BaseModel):
    to: str
    text: str


async def _preview_fax(args: Fax, ctx: ToolContext) -> Preview:
    return Preview(f"Send a fax to {args.to}", (Change("text", None, args.text),))


@write_tool("send_fax", "Send a fax (a person must approve it first).", Fax, preview=_preview_fax)
async def send_fax(args: Fax, ctx: ToolContext) -> Outcome:
    SENT.append(args.text)  # the request reached the service ...
    if SLOW[0]:
        await asyncio.sleep(5)  # ... and its answer takes longer than the tool may run
    return Outcome({"sent": True}, "Fax sent")


TOOLS = [send_fax]


@pytest.fixture
async def bot(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> AsyncIterator[RunningBot]:
    packs = ["bot.tools.packs.tasks", "bot.tools.packs.slack", "tests.test_unknown_outcomes"]
    running = await start_bot(
        make_settings(
            fake_slack,
            fake_model,
            sqlite_url,
            tool_packs=packs,
            tool_timeout_seconds=1,
            lease_seconds=5,
        )
    )
    yield running
    await stop_bot(running)


def buttons(card: StoredMessage) -> list[dict[str, Any]]:
    return [
        e for b in card.blocks or [] if b.get("type") == "actions" for e in b.get("elements", [])
    ]


def posts_of(slack: FakeSlack, channel: str, text: str) -> list[StoredMessage]:
    return [m for m in slack.bot_messages(channel) if m.text == text]


async def test_a_slack_post_whose_answer_was_lost_is_unknown_and_retry_finds_it_in_a_busy_channel(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    post = {"channel": "CDEV", "text": "Deploy freeze starts at 5pm."}
    fake_model.script(
        Script(tool_calls=[call("post_message", post)]),
        Script(text="I could not tell whether it was posted."),
        Script(text="It is posted."),
    )
    await bot.mention("C1", "announce the freeze in #dev", fake_slack)
    await bot.idle()
    (card,) = fake_slack.cards("C1")
    fake_slack.lose_answers["chat.postMessage"] = 1  # Slack posts it; its answer is lost
    await bot.click(card, cards.APPROVE, "UALICE", "C1")
    await bot.idle()

    (proposal,) = await proposals(bot)
    assert proposal.state.value == "unknown"
    assert len(posts_of(fake_slack, "CDEV", post["text"])) == 1  # sent once, never re-sent
    shown = card_text(fake_slack.cards("C1")[0])
    assert "Outcome unknown" in shown
    assert "may have been carried out" in shown
    assert "Check the destination" in shown
    assert "Retry looks for the earlier write first" in shown
    assert [b["action_id"] for b in buttons(fake_slack.cards("C1")[0])] == [cards.RETRY]
    (told,) = tool_results(fake_model)
    assert told["status"] == "unknown"
    assert "do not call it again" in told["instruction"]

    # The channel gets busy: 450 messages after the post (Slack pages 200 at most).
    for n in range(450):
        fake_slack.add_user_message("CDEV", f"chatter {n}", user="UBOB")
    before = len(fake_slack.calls_to("chat.postMessage"))
    await bot.click_value(proposal.id, cards.RETRY, "UALICE", "C1", fake_slack)
    await bot.idle()

    (proposal,) = await proposals(bot)
    assert proposal.state.value == "succeeded"
    assert len(posts_of(fake_slack, "CDEV", post["text"])) == 1  # found, not posted again
    assert not [
        c
        for c in fake_slack.calls_to("chat.postMessage")[before:]
        if c.args.get("channel") == "CDEV"
    ]
    looked = fake_slack.calls_to("conversations.history")
    assert len(looked) >= 3  # it paged through everything since the approval
    assert proposal.decided_at is not None  # from the approval on, not from the dawn of time
    approved_at = proposal.decided_at.timestamp()
    assert all(approved_at - 61 < float(c.args["oldest"]) < approved_at for c in looked)


async def test_a_tool_that_cannot_look_for_its_write_needs_a_confirmed_retry(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    SENT.clear()
    SLOW[0] = True
    fax = {"to": "+49 30 1234", "text": "Signed contract attached."}
    fake_model.script(
        Script(tool_calls=[call("send_fax", fax)]),
        Script(text="The fax may or may not have gone out."),
        Script(text="Sent."),
    )
    await bot.mention("C1", "fax the contract", fake_slack)
    await bot.idle()
    await bot.click(fake_slack.cards("C1")[0], cards.APPROVE, "UALICE", "C1")
    await bot.idle()

    (proposal,) = await proposals(bot)
    assert proposal.state.value == "unknown"  # timed out after sending: not "failed"
    assert [fax["text"]] == SENT
    card = fake_slack.cards("C1")[0]
    shown = card_text(card)
    assert "Outcome unknown" in shown
    assert "a retry may write a second time" in shown
    (retry,) = buttons(card)
    assert retry["action_id"] == cards.RETRY_CONFIRMED
    assert retry["confirm"]["title"]["text"] == "It may write twice"
    assert "cannot be looked up" in retry["confirm"]["text"]["text"]
    assert tool_results(fake_model)[0]["status"] == "unknown"

    # A plain Retry (an old card, a crafted click) does not write twice unconfirmed.
    await bot.click_value(proposal.id, cards.RETRY, "UALICE", "C1", fake_slack)
    await bot.idle()
    assert [fax["text"]] == SENT
    assert (await proposals(bot))[0].state.value == "unknown"
    assert any("may write twice" in t for t in fake_slack.ephemerals_for("UALICE"))
    refused = [e for e in await audit(bot) if e.event == "refused"]
    assert [(e.actor, (e.detail or {}).get("reason")) for e in refused] == [
        ("UALICE", "not confirmed")
    ]

    SLOW[0] = False
    await bot.click(card, cards.RETRY_CONFIRMED, "UALICE", "C1")
    await bot.idle()
    (proposal,) = await proposals(bot)
    assert proposal.state.value == "succeeded"
    assert [fax["text"], fax["text"]] == SENT  # written again, as its clicker confirmed
    retry_row = [e for e in await audit(bot) if e.event == "retry"][-1]
    assert (retry_row.detail or {}).get("may_write_twice_confirmed_by") == "UALICE"


async def test_a_scheduled_message_whose_answer_was_lost_is_not_scheduled_twice(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    post_at = (datetime.now(UTC) + timedelta(days=1)).replace(microsecond=0)
    schedule = {
        "channel": "CDEV",
        "text": "Standup moved to 10:30.",
        "post_at": post_at.isoformat(),
    }
    fake_model.script(
        Script(tool_calls=[call("schedule_message", schedule)]),
        Script(text="Not sure it was scheduled."),
        Script(text="Scheduled."),
    )
    # The channel already has plenty scheduled (more than one page of Slack's list).
    for n in range(130):
        fake_slack.scheduled.append(
            {"channel": "CDEV", "text": f"reminder {n}", "post_at": str(int(post_at.timestamp()))}
        )
    await bot.mention("C1", "schedule the standup note", fake_slack)
    await bot.idle()
    fake_slack.lose_answers["chat.scheduleMessage"] = 1
    await bot.click(fake_slack.cards("C1")[0], cards.APPROVE, "UALICE", "C1")
    await bot.idle()
    (proposal,) = await proposals(bot)
    assert proposal.state.value == "unknown"
    assert len(fake_slack.calls_to("chat.scheduleMessage")) == 1
    sent = fake_slack.calls_to("chat.scheduleMessage")[0].args
    metadata = sent["metadata"]
    metadata = json.loads(metadata) if isinstance(metadata, str) else metadata
    assert metadata["event_payload"]["key"] == proposal.idempotency_key

    await bot.click_value(proposal.id, cards.RETRY, "UALICE", "C1", fake_slack)
    await bot.idle()
    (proposal,) = await proposals(bot)
    assert proposal.state.value == "succeeded"
    assert len(fake_slack.calls_to("chat.scheduleMessage")) == 1  # found in the list
    assert proposal.result is not None
    assert proposal.result["scheduled_message_id"] == "Q131"
    assert len([m for m in fake_slack.scheduled if m["text"] == schedule["text"]]) == 1


def _raised_over(inner: BaseException, outer: BaseException) -> BaseException:
    """`outer` raised `from None` while handling `inner`, as packs word transport errors."""
    try:
        try:
            raise inner
        except BaseException:
            raise outer from None
    except BaseException as exc:
        return exc


def _slack_error(status: int, body: object) -> SlackApiError:
    response = SlackResponse(
        client=None,
        http_verb="POST",
        api_url="https://slack.test/api/chat.postMessage",
        req_args={},
        data=body,  # type: ignore[arg-type]
        headers={},
        status_code=status,
    )
    return SlackApiError("failed", response)  # type: ignore[no-untyped-call]


@pytest.mark.parametrize(
    ("exc", "unknown"),
    [
        (TimeoutError(), True),
        (OutcomeUnknown("the service said it may have"), True),
        (aiohttp.ServerDisconnectedError(), True),
        (aiohttp.ClientPayloadError("cut off"), True),
        (httpx2.ReadTimeout("slow"), True),
        (httpx2.RemoteProtocolError("closed"), True),
        (json.JSONDecodeError("not JSON", "<html>", 0), True),
        (_slack_error(200, "<html>proxy</html>"), True),  # an answer that cannot be read
        (_slack_error(502, {}), True),
        (_slack_error(200, {"ok": False, "error": "channel_not_found"}), False),
        (httpx2.ConnectError("refused"), False),  # never sent
        (aiohttp.ClientConnectorError(None, OSError(111, "refused")), False),  # type: ignore[arg-type]
        (ToolError("GitHub refused creating an issue (422: invalid)"), False),
        (_raised_over(httpx.RemoteProtocolError("closed"), ToolError("not reached")), True),
        (_raised_over(httpx.ConnectError("refused"), ToolError("not reached")), False),
        (ValueError("post_at is in the past"), False),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else str(v),
)
def test_which_failures_leave_the_outcome_unknown(exc: BaseException, unknown: bool) -> None:
    assert outcome_unknown(exc) is unknown
