"""Every `chat.update` (and `chat.stopStream`) the bot makes goes through its workspace budget
(issue 28), also the ones made outside a live reply: the messages a crashed process left
half-written, finished at start-up and by every sweep. The real slack_sdk client over loopback
against the fake Slack, which enforces Tier 3 on `chat.update`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.conversation.live_replies import CUT_OFF, LiveReplies
from bot.db.models import LiveReply, utcnow
from bot.db.session import Database
from bot.slack.budget_card import CONTINUE_CHEAPER
from bot.slack.budgets import WorkspaceBudgets
from bot.slack.card_publisher import CardEdit
from bot.slack.native_reply import CURSOR
from tests.fakes.openai import FakeOpenAI
from tests.fakes.slack import FakeSlack, wait_until
from tests.harness import RunningBot
from tests.spend_front import ask, pause_cards


@pytest.fixture
async def db(sqlite_url: str) -> AsyncIterator[Database]:
    found = Database.from_url(sqlite_url)
    yield found
    await found.dispose()


async def cut_off(db: Database, slack: FakeSlack, count: int) -> list[str]:
    """`count` messages a process was writing when it died (their leases lapsed)."""
    tss = [slack.add_user_message(f"C{i}", f"words {i}{CURSOR}") for i in range(count)]
    async with db.transaction() as session:
        for i, ts in enumerate(tss):
            session.add(
                LiveReply(
                    channel_id=f"C{i}",
                    ts=ts,
                    shown=f"words {i}{CURSOR}",
                    owner="crashed-worker",
                    lease_expires_at=utcnow() - timedelta(seconds=1),
                )
            )
    return tss


async def test_replies_a_crash_cut_off_are_finished_within_the_edit_budget(
    fake_slack: FakeSlack, client: AsyncWebClient, budgets: WorkspaceBudgets, db: Database
) -> None:
    # A process streaming 60 replies died; the next one finishes what they showed. Slack allows
    # 50 edits a minute: the 51st must wait for the window (or the next sweep), not be sent
    # into a 429 that pauses every live reply's edits for its Retry-After.
    tss = await cut_off(db, fake_slack, 60)
    started = time.monotonic()
    finished = await asyncio.wait_for(LiveReplies(db, "next-worker").recover(client, budgets), 15)
    assert time.monotonic() - started < 10, "a start-up does not wait a minute for the budget"

    assert [c.status for c in fake_slack.calls_to("chat.update") if c.status == 429] == []
    assert 0 < finished < 50, "the finals' headroom of the replies about to start stays free"
    assert await budgets.edits.window.free() == 50 - finished, "its edits count in the window"
    shown = [fake_slack.thread(f"C{i}")[0].text for i in range(len(tss))]
    assert sum(text == f"words {i}\n\n{CUT_OFF}" for i, text in enumerate(shown)) == finished
    # The rest are left for the next sweep, on this replica or another.
    async with db.transaction() as session:
        left = (await session.scalars(LiveReply.__table__.select())).all()
    assert len(left) == 60 - finished


async def test_a_native_stream_a_crash_cut_off_is_stopped_within_the_stops_budget(
    fake_slack: FakeSlack, client: AsyncWebClient, budgets: WorkspaceBudgets, db: Database
) -> None:
    asked = fake_slack.add_user_message("C1", "question")
    started = await client.chat_startStream(
        channel="C1", thread_ts=asked, recipient_user_id="UALICE", recipient_team_id="T1"
    )
    ts = str(started["ts"])
    async with db.transaction() as session:
        session.add(
            LiveReply(
                channel_id="C1",
                ts=ts,
                shown=f"streamed{CURSOR}",
                owner="crashed-worker",
                lease_expires_at=utcnow() - timedelta(seconds=1),
            )
        )
    assert await LiveReplies(db, "next-worker").recover(client, budgets) == 1
    assert fake_slack.thread("C1", asked)[-1].text == f"streamed\n\n{CUT_OFF}"
    # The stop and both edits (the one the open stream refused, then the one that landed)
    # took their slots in the workspace's windows (Tier 2 stops, Tier 3 edits).
    assert await budgets.streams.stops.free() == 19
    assert await budgets.edits.window.free() == 48
    assert budgets.streams.open_streams == 0


async def spend_the_edits(bot: RunningBot, slack: FakeSlack) -> None:
    """Other cards take the whole minute's `chat.update` budget (Slack's Tier 3: 50)."""
    budget, client = bot.countersign.budget, bot.countersign.slack
    ts = slack.add_user_message("C9", "a busy card")
    free = await budget.window.free()
    for _ in range(free):
        await budget.acquire(CardEdit())
        await client.chat_update(channel="C9", ts=ts, text="edited")
    assert await budget.window.free() == 0


async def test_a_pause_cards_edit_after_a_click_waits_for_the_edit_budget(
    spend_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    await ask(spend_bot, fake_slack, "first question")
    await ask(spend_bot, fake_slack, "second question")
    [card] = pause_cards(fake_slack)
    await spend_the_edits(spend_bot, fake_slack)
    before = len(fake_slack.calls_to("chat.update"))
    assert await spend_bot.click(card, CONTINUE_CHEAPER, "UALICE", "C1") == 200
    await wait_until(lambda: len(fake_model.requests) == 2)  # the turn resumes at once
    await asyncio.sleep(1.0)
    # The card's edit waits for the window to refill: it is not sent into a 429 (which would
    # pause every reply's edits for its Retry-After).
    assert fake_slack.calls_to("chat.update")[before:] == []
    # (What waits for the window is told the process stops, instead of waiting a minute.)
    await spend_bot.countersign.budget.stop()
