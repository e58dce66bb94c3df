"""`kill -9` at six points of a turn's life, with real bot processes, each followed by a
restart. After every restart: every reply is finished (no cursor, no lone "Thinking…"), each
approved write ran at most once, and every settled turn resumed exactly once."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path

import aiohttp
import pytest
from sqlalchemy import func, select, update

from bot.db.models import LiveReply, Proposal, ProposalState, ResumeRequest, StopEntry, Task, utcnow
from bot.db.session import Database
from bot.keyed_messages import keyed
from bot.slack import cards
from bot.tools.packs.slack import IDEMPOTENCY_EVENT
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import DEFAULT_MEMBERS, FakeSlack, wait_until
from tests.harness import SlackFront
from tests.test_approvals_flow import CREATE, call
from tests.test_runtime import bot_env, free_port, start_process

CURSOR = "▍"
THINKING = "_Thinking…_"


class Bot:
    """One bot process on a fixed port and database; `kill()` is SIGKILL, no clean-up."""

    def __init__(self, slack: FakeSlack, model: FakeOpenAI, tmp_path: Path) -> None:
        self.env = bot_env(
            slack,
            model,
            tmp_path,
            SWEEP_INTERVAL_SECONDS="0.2",
            LEASE_SECONDS="1",
            TOOL_TIMEOUT_SECONDS="2",
            PROPOSAL_REMINDER_MINUTES="0",
            SLACK_EDIT_MIN_INTERVAL_SECONDS="0.2",
        )
        self.tmp_path = tmp_path
        self.port = free_port()
        self.process: subprocess.Popen[str] | None = None
        self.session = aiohttp.ClientSession()
        self.front = SlackFront(f"http://127.0.0.1:{self.port}", self.session)

    async def start(self) -> None:
        self.process = await start_process(self.env, self.port, self.tmp_path)

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    async def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        await self.session.close()


@pytest.fixture
async def crashing(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, tmp_path: Path
) -> AsyncIterator[tuple[Bot, Database]]:
    bot = Bot(fake_slack, fake_model, tmp_path)
    db = Database.from_url(f"sqlite:///{tmp_path / 'bot.db'}")
    yield bot, db
    await bot.close()
    await db.dispose()


def unfinished(slack: FakeSlack, channel: str = "C1") -> list[str]:
    return [m.text for m in slack.bot_messages(channel) if CURSOR in m.text or m.text == THINKING]


async def count(db: Database, model: type[object], *where: object) -> int:
    async with db.transaction() as session:
        query = select(func.count()).select_from(model)
        for clause in where:
            query = query.where(clause)  # type: ignore[arg-type]
        return int(await session.scalar(query) or 0)


async def eventually(check: Callable[[], object], timeout: float = 20) -> None:
    await wait_until(check, timeout=timeout, interval=0.05)


async def until_db(db: Database, model: type[object], n: int, *where: object) -> None:
    for _ in range(400):
        if await count(db, model, *where) >= n:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{model.__name__} never reached {n}")


def texts(slack: FakeSlack, channel: str = "C1") -> list[str]:
    return [m.text for m in slack.bot_messages(channel)]


async def assert_invariants(slack: FakeSlack, db: Database) -> None:
    # A restarted process finishes what the dead one left once its lease lapses and a sweep
    # runs: on a loaded machine (the whole suite on 2 cores) that took more than 20 s.
    await eventually(lambda: not unfinished(slack), timeout=45)
    for _ in range(200):  # a reply's journal row goes a moment after its final text shows
        if await count(db, LiveReply) == 0:
            break
        await asyncio.sleep(0.05)
    assert await count(db, LiveReply) == 0
    await assert_written_once(db, slack)
    # Every settled turn's resume is done (its reply stored a moment after it showed).
    await until_db(db, ResumeRequest, 0)
    for _ in range(200):
        if await count(db, ResumeRequest, ResumeRequest.done_at.is_(None)) == 0:
            break
        await asyncio.sleep(0.05)
    assert await count(db, ResumeRequest, ResumeRequest.done_at.is_(None)) == 0


def _metadata(raw: object) -> object:
    return json.loads(raw) if isinstance(raw, str) else raw


async def assert_written_once(db: Database, slack: FakeSlack) -> None:
    """Each approved write reached its destination at most once, counted where it landed:
    the tasks on the board and the posts Slack received carrying each proposal's key (what a
    run count would hide: a run whose write landed twice)."""
    async with db.transaction() as session:
        keys = [p.idempotency_key for p in (await session.scalars(select(Proposal))).all()]
        for key in keys:
            made = await session.scalar(
                select(func.count()).select_from(Task).where(Task.idempotency_key == key)
            )
            assert (made or 0) <= 1
    for key in keys:
        written = json.dumps(keyed(IDEMPOTENCY_EVENT, key))  # a post's mark (cards have theirs)
        received = [
            c
            for c in slack.calls_to("chat.postMessage")
            if json.dumps(_metadata(c.args.get("metadata"))) == written
        ]
        assert len(received) <= 1, f"Slack received {len(received)} posts of one approved write"


async def assert_resumed_once(slack: FakeSlack, db: Database) -> None:
    """The invariants, the one task the approved create_task made, one resumed reply."""
    await eventually(lambda: "Resumed." in texts(slack))
    await assert_invariants(slack, db)
    assert await count(db, Task) == 1
    assert texts(slack).count("Resumed.") == 1


async def propose(bot: Bot, slack: FakeSlack) -> None:
    await bot.front.mention("C1", "track the login bug", slack)
    await eventually(lambda: slack.cards("C1"))


async def test_killed_mid_stream(
    crashing: tuple[Bot, Database], fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot, db = crashing
    fake_model.script(Script(text=" ".join(f"t{i}" for i in range(80)), tokens_per_second=10))
    await bot.start()
    await bot.front.mention("C1", "a long answer please", fake_slack)
    await eventually(lambda: any(CURSOR in t and "t1" in t for t in texts(fake_slack)))
    await until_db(db, LiveReply, 1, LiveReply.shown.contains("t1"))  # the journal trails Slack
    bot.kill()
    assert unfinished(fake_slack)  # the crash left a cursor behind
    await bot.start()
    await assert_invariants(fake_slack, db)
    (reply,) = texts(fake_slack)
    assert reply.startswith("t0 t1")  # what the journal last stored
    assert "Interrupted" in reply


async def test_killed_mid_native_stream(
    crashing: tuple[Bot, Database], fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """A native stream cut off by SIGKILL: the next process stops the stream (Slack would
    keep it open for minutes) and finishes the message with what it showed and a note."""
    bot, db = crashing
    bot.env["STREAMING"] = "native"
    fake_model.script(Script(text=" ".join(f"t{i}" for i in range(80)), tokens_per_second=10))
    await bot.start()
    await bot.front.mention("C1", "a long answer please", fake_slack)
    await eventually(lambda: any("t2" in t for t in texts(fake_slack)))
    (message,) = fake_slack.streamed_messages("C1")
    await until_db(db, LiveReply, 1, LiveReply.shown.contains("t2"))  # the journal trails Slack
    bot.kill()
    assert fake_slack.streams[message.ts].open  # the crash left the stream open
    await bot.start()
    await eventually(lambda: "Interrupted" in texts(fake_slack)[0])
    assert not fake_slack.streams[message.ts].open
    (reply,) = texts(fake_slack)
    assert reply.startswith("t0 t1 t2")
    await assert_invariants(fake_slack, db)


async def test_killed_after_the_card_was_posted(
    crashing: tuple[Bot, Database], fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot, db = crashing
    fake_model.script(Script(tool_calls=[call("create_task", CREATE)]), Script(text="Resumed."))
    await bot.start()
    await propose(bot, fake_slack)
    bot.kill()
    await bot.start()
    await bot.front.click(fake_slack.cards("C1")[0], cards.APPROVE, "UALICE", "C1")
    await assert_resumed_once(fake_slack, db)


async def test_killed_after_the_approval_before_the_write(
    crashing: tuple[Bot, Database], fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """A real process, `kill -9` once the approval is stored and execution claimed, while the
    executor re-reads the target (Slack slow to answer) and before anything was written. The
    next process cannot know how far the dead one got: the card says the write may have run,
    the model is told the outcome is unknown, and the Retry makes the task exactly once."""
    bot, db = crashing
    fake_model.script(
        Script(tool_calls=[call("create_task", CREATE)]),
        Script(text="It may not have been made."),
        Script(text="Resumed."),
    )
    await bot.start()
    await propose(bot, fake_slack)
    # The re-read names the assignee; the approver's own look-up stays quick.
    fake_slack.delays_for["users.info", CREATE["assignee"]] = 60
    await bot.front.click(fake_slack.cards("C1")[0], cards.APPROVE, "UALICE", "C1")
    await until_db(db, Proposal, 1, Proposal.state == ProposalState.EXECUTING)
    bot.kill()
    fake_slack.delays_for.clear()
    assert await count(db, Task) == 0
    await bot.start()
    await until_db(db, Proposal, 1, Proposal.state == ProposalState.UNKNOWN)
    await eventually(lambda: "may have run" in json.dumps(fake_slack.cards("C1")[0].blocks))
    await eventually(lambda: "It may not have been made." in texts(fake_slack))
    told = [
        json.loads(m["content"])
        for m in fake_model.requests[1].body["messages"]
        if m["role"] == "tool"
    ]
    assert [t["status"] for t in told] == ["unknown"]
    await bot.front.click(fake_slack.cards("C1")[0], cards.RETRY, "UALICE", "C1")
    await until_db(db, Proposal, 1, Proposal.state == ProposalState.SUCCEEDED)
    await eventually(lambda: "Resumed." in texts(fake_slack))
    await assert_invariants(fake_slack, db)
    assert await count(db, Task) == 1


async def test_killed_between_cancelling_a_stop_and_withdrawing_resumes_nothing(
    crashing: tuple[Bot, Database], fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """A real process, `kill -9` in the middle of a Stop: journalled, the turn's running
    work cancelled, its proposal not withdrawn yet (the check that the stopper may withdraw it
    waits on Slack). The next process completes the Stop from the journal: the card says
    withdrawn, and the turn never resumes."""
    bot, db = crashing
    bot.env["APPROVAL_POLICIES"] = json.dumps({"tasks": {"approvers": ["S0LEADS"]}})
    fake_slack.user_groups["S0LEADS"] = ["UBOSS"]
    fake_slack.members["C1"] = [*DEFAULT_MEMBERS, "UBOSS"]  # the approver reads the thread
    fake_model.script(
        Script(tool_calls=[call("create_task", CREATE)]), Script(text="Must never be said.")
    )
    await bot.start()
    root = await bot.front.mention("C1", "track the login bug", fake_slack)
    await eventually(lambda: fake_slack.cards("C1"))
    fake_slack.delays["usergroups.users.list"] = 60
    event = fake_slack.press_stop("C1", root, "UBOSS")
    assert await bot.front.send_event(event) == 200
    await until_db(db, StopEntry, 1)
    await asyncio.sleep(0.3)  # the Stop now waits on Slack to learn who leads
    bot.kill()
    fake_slack.delays.clear()
    assert await count(db, Proposal, Proposal.state == ProposalState.PROPOSED) == 1
    assert await count(db, StopEntry, StopEntry.done_at.is_(None)) == 1
    async with db.transaction() as session:  # time passes: the journal entry is left behind
        earlier = utcnow() - timedelta(minutes=2)
        await session.execute(update(StopEntry).values(created_at=earlier))
        await session.execute(update(Proposal).values(created_at=earlier))
    await bot.start()
    await until_db(db, Proposal, 1, Proposal.state == ProposalState.WITHDRAWN)
    await eventually(lambda: "Withdrawn" in json.dumps(fake_slack.cards("C1")[0].blocks))
    assert await count(db, StopEntry, StopEntry.done_at.is_(None)) == 0
    await asyncio.sleep(1.0)  # a few sweeps: nothing resumes the stopped turn
    assert len(fake_model.requests) == 1
    assert "Must never be said." not in texts(fake_slack)
    await assert_invariants(fake_slack, db)


async def test_killed_mid_execution_then_retried_posts_once(
    crashing: tuple[Bot, Database], fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """The process dies after the Slack post went out but before its outcome was stored; the
    Retry reuses the idempotency key and finds the earlier post instead of posting again."""
    bot, db = crashing
    post = {"channel": "CREL", "text": "Release at 5pm"}
    fake_model.script(
        Script(tool_calls=[call("post_message", post)]),
        Script(text="It was interrupted."),
        Script(text="Now it is done."),
    )
    await bot.start()
    await propose(bot, fake_slack)
    fake_slack.delays["chat.getPermalink"] = 60  # the step right after the post
    await bot.front.click(fake_slack.cards("C1")[0], cards.APPROVE, "UALICE", "C1")
    await eventually(
        lambda: any(m.text == "Release at 5pm" for m in fake_slack.bot_messages("CREL"))
    )
    bot.kill()
    fake_slack.delays.clear()
    await bot.start()
    await eventually(lambda: cards.RETRY in json.dumps(fake_slack.cards("C1")[0].blocks))
    await bot.front.click(fake_slack.cards("C1")[0], cards.RETRY, "UALICE", "C1")
    await until_db(db, Proposal, 1, Proposal.state == ProposalState.SUCCEEDED)
    await eventually(lambda: "Now it is done." in texts(fake_slack))
    await assert_invariants(fake_slack, db)
    posts = [m for m in fake_slack.bot_messages("CREL") if m.text == "Release at 5pm"]
    assert len(posts) == 1


async def test_killed_after_execution_before_the_resume(
    crashing: tuple[Bot, Database], fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot, db = crashing
    fake_model.script(Script(tool_calls=[call("create_task", CREATE)]), Script(text="Resumed."))
    await bot.start()
    await propose(bot, fake_slack)
    fake_slack.delays["chat.postMessage"] = 60  # the resumed reply's placeholder
    await bot.front.click(fake_slack.cards("C1")[0], cards.APPROVE, "UALICE", "C1")
    await until_db(db, ResumeRequest, 1, ResumeRequest.claimed_by.is_not(None))
    assert await count(db, Task) == 1
    bot.kill()
    fake_slack.delays.clear()
    await bot.start()
    await assert_resumed_once(fake_slack, db)


async def test_killed_mid_resume(
    crashing: tuple[Bot, Database], fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot, db = crashing
    fake_model.script(
        Script(tool_calls=[call("create_task", CREATE)]),
        Script(text="never shown", time_to_first_token=60),
        Script(text="Resumed."),
    )
    await bot.start()
    await propose(bot, fake_slack)
    await bot.front.click(fake_slack.cards("C1")[0], cards.APPROVE, "UALICE", "C1")
    await eventually(lambda: THINKING in texts(fake_slack))  # the resume's placeholder
    await eventually(lambda: len(fake_model.requests) == 2)  # and its model request is out
    # Killed once the placeholder is in the journal: a crash between Slack's post and the
    # journal's insert leaves the message unrecorded (bot/slack/reply_journal.py), a window a
    # loaded machine widened past the model request (the whole suite beside busy cores).
    (placeholder,) = [m.ts for m in fake_slack.bot_messages("C1") if m.text == THINKING]
    await until_db(db, LiveReply, 1, LiveReply.ts == placeholder)
    bot.kill()
    await bot.start()
    await assert_resumed_once(fake_slack, db)
    assert "never shown" not in " ".join(texts(fake_slack))
