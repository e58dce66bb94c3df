"""Every model request is bounded (issue 28): REPLY_TOKENS goes as `max_tokens` with each one
(replies, tool rounds, resumes, summaries, titles) and MODEL_DEADLINE_SECONDS bounds it from
sending to its last token. A reply cut by either keeps its words and ends with a note saying
which; a tool call cut mid-arguments is never run; nothing is retried; the bot goes on.

The real `openai` client over loopback against tests/fakes/openai.py, which honours
`max_tokens` as OpenAI does (the stream stops where it is, with finish_reason "length")."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from sqlalchemy import select

from bot.config import Settings, SettingsError, load_settings
from bot.conversation.history import is_valid_history
from bot.conversation.notes import deadline_note, length_note
from bot.conversation.titles import TITLE_TOKENS
from bot.db.models import Message, Proposal, ResumeRequest, Role, Task
from bot.deadlines import Deadline
from bot.llm import DEADLINE, LENGTH, LLM, Finished, LLMError, make_client
from bot.slack import cards
from tests.fakes.openai import API_KEY, MODEL, Completion, FakeOpenAI, Script, ScriptedToolCall
from tests.fakes.slack import FakeSlack
from tests.harness import RunningBot, running
from tests.test_llm_stream import collect

CREATE = {"title": "Fix login bug", "description": "SSO loops", "assignee": "UDANA"}
LENGTH_NOTE = ":scissors: _Stopped here: the reply reached its length limit (100 tokens)._"
DEADLINE_NOTE = ":scissors: _Stopped here: the model took longer than 1 second._"


def words(count: int) -> str:
    return " ".join(f"w{i}" for i in range(count))


def call(name: str, arguments: dict[str, Any], call_id: str = "call_1") -> ScriptedToolCall:
    return ScriptedToolCall(call_id, name, json.dumps(arguments))


async def rows(bot: RunningBot, kind: Any) -> list[Any]:
    async with bot.countersign.db.transaction() as session:
        return list((await session.scalars(select(kind).order_by(kind.id))).all())


def split_note(text: str) -> tuple[str, str]:
    """A reply's words and the note that ends it."""
    shown, _, note = text.rpartition("\n\n")
    return shown, note


async def disconnected(model: FakeOpenAI, index: int) -> bool:
    """Whether the server saw the client go away from stream `index` (it notices on its next
    write, a tenth of a second apart in these scripts)."""
    for _ in range(100):
        if model.played[index].disconnected_at is not None:
            return True
        await asyncio.sleep(0.05)
    return False


# -- the model's side alone ---------------------------------------------------------------------


def llm_for(model: FakeOpenAI, max_tokens: int | None = None, deadline: float | None = None) -> LLM:
    settings = Settings(
        _env_file=None,
        slack_bot_token="xoxb-x",
        openai_api_key=API_KEY,
        openai_base_url=model.base_url,
        llm_model=MODEL,
        llm_max_retries=0,
        llm_timeout_seconds=5,
    )
    return LLM(make_client(settings), MODEL, max_tokens, deadline)


async def test_a_stream_past_its_deadline_ends_as_it_stands_and_its_connection_is_closed(
    fake_model: FakeOpenAI,
) -> None:
    fake_model.script(Script(text=words(100), tokens_per_second=10))  # ten seconds of it
    text, finished = await collect(llm_for(fake_model, deadline=0.5))
    assert finished == Finished(DEADLINE, [], None, MODEL)
    assert finished.cut
    assert words(100).startswith(text)
    assert len(text) < len(words(100))
    assert await disconnected(fake_model, 0)  # the HTTP stream was closed, not left open


async def test_an_answer_whose_stream_never_ends_is_kept_as_soon_as_it_is_complete(
    fake_model: FakeOpenAI,
) -> None:
    # The answer, its finish reason and its usage came; the server never sends `[DONE]` nor
    # closes. The answer is whole: it is not held until the deadline (or the read time-out)
    # and then thrown away as cut or failed.
    fake_model.script(Script(text="All done.", hang_before_done=True))
    started = time.monotonic()
    text, finished = await collect(llm_for(fake_model, deadline=30))
    assert time.monotonic() - started < 4, "not held until the read time-out (5 s)"
    assert (text, finished.finish_reason, finished.cut) == ("All done.", "stop", False)
    assert finished.usage is not None


async def test_the_deadline_counts_from_sending_so_a_model_that_never_starts_is_cut_too(
    fake_model: FakeOpenAI,
) -> None:
    fake_model.script(Script(text="late", time_to_first_token=3))
    text, finished = await collect(llm_for(fake_model, deadline=0.3))
    assert (text, finished.finish_reason) == ("", DEADLINE)


async def test_a_stream_at_max_tokens_ends_with_length_and_drops_the_cut_call(
    fake_model: FakeOpenAI,
) -> None:
    fake_model.script(Script(text=words(8), tool_calls=[call("create_task", CREATE)]))
    text, finished = await collect(llm_for(fake_model, max_tokens=12))
    assert fake_model.requests[0].body["max_tokens"] == 12
    assert text == words(8)
    assert (finished.finish_reason, finished.tool_calls) == (LENGTH, [])
    assert finished.usage is not None
    assert finished.usage.completion_tokens == 12


async def test_a_non_streamed_answer_past_the_deadline_is_a_plain_error(
    fake_model: FakeOpenAI,
) -> None:
    fake_model.complete_for("summarise", Completion("too late", delay=3))
    with pytest.raises(LLMError) as caught:
        await llm_for(fake_model, deadline=0.3).complete(
            [{"role": "user", "content": "summarise this"}], 50
        )
    assert caught.value.user_message == "the model took too long to answer"


# -- through the front door ---------------------------------------------------------------------


async def test_every_model_request_carries_its_token_cap(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    """Replies, tool rounds and resumes send REPLY_TOKENS; a summary sends SUMMARY_TOKENS and
    a title its own few tokens."""
    fake_model.complete_for("Write a title", Completion("Login bug"))
    fake_model.script(
        Script(tool_calls=[call("list_tasks", {})]),  # a read: a tool round
        Script(text="I'll create it.", tool_calls=[call("create_task", CREATE, "call_2")]),
        Script(text="Created."),  # the resume after Approve
        Script(text="Still here."),
        Script(text="And again."),
    )
    async with running(
        fake_slack,
        fake_model,
        sqlite_url,
        reply_tokens=321,
        summary_tokens=123,
        history_window_messages=2,
        title_model="",
    ) as bot:
        root = await bot.mention("C1", "track the login bug", fake_slack)
        await bot.idle()
        (card,) = fake_slack.cards("C1")
        assert await bot.click(card, cards.APPROVE, "UALICE", "C1") == 200
        await bot.idle()
        for question in ("anything else?", "and now?"):
            await bot.mention("C1", question, fake_slack, thread_ts=root)
            await bot.idle()
    streamed = [b for b in fake_model.bodies if b.get("stream")]
    assert len(streamed) == 5
    assert [b["max_tokens"] for b in streamed] == [321] * 5
    assert [m["role"] for m in streamed[2]["messages"]][-2:] == ["assistant", "tool"]  # resume
    (title,) = fake_model.completions
    assert title["max_tokens"] == TITLE_TOKENS
    summaries = [b for b in fake_model.bodies if not b.get("stream") and b is not title]
    assert summaries
    assert all(b["max_tokens"] == 123 for b in summaries)


async def test_a_reply_that_reaches_reply_tokens_keeps_its_words_and_says_so(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    fake_model.script(Script(text=words(150)), Script(text="Recovered."))
    async with running(fake_slack, fake_model, sqlite_url, reply_tokens=100) as bot:
        root = await bot.mention("C1", "tell me everything", fake_slack)
        await bot.idle()
        (reply,) = fake_slack.bot_messages("C1")
        assert split_note(reply.text) == (words(100), LENGTH_NOTE)
        assert not reply.blocks  # no feedback buttons on an answer cut short
        stored = await rows(bot, Message)
        assert [(m.role, m.content) for m in stored] == [
            (Role.USER, stored[0].content),
            (Role.ASSISTANT, words(100)),
        ]
        await bot.mention("C1", "go on", fake_slack, thread_ts=root)
        await bot.idle()
        assert fake_slack.bot_messages("C1")[-1].text == "Recovered."
        assert is_valid_history(await rows(bot, Message))


async def test_a_reply_slower_than_the_deadline_ends_with_a_note_and_the_bot_goes_on(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    fake_model.script(Script(text=words(100), tokens_per_second=10), Script(text="Recovered."))
    async with running(fake_slack, fake_model, sqlite_url, model_deadline_seconds=1) as bot:
        root = await bot.mention("C1", "take your time", fake_slack)
        await bot.idle()
        (reply,) = fake_slack.bot_messages("C1")
        shown, note = split_note(reply.text)
        assert note == DEADLINE_NOTE
        assert words(100).startswith(shown)
        assert len(shown) < len(words(100))
        assert await disconnected(fake_model, 0)
        assert [m.content for m in await rows(bot, Message) if m.role == Role.ASSISTANT] == [shown]
        await bot.mention("C1", "shorter, please", fake_slack, thread_ts=root)
        await bot.idle()
        assert fake_slack.bot_messages("C1")[-1].text == "Recovered."
        assert is_valid_history(await rows(bot, Message))
    assert len(fake_model.requests) == 2  # nothing was asked again on its own


async def test_a_write_call_cut_at_reply_tokens_is_not_proposed(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    """90 words, then the call's arguments five characters at a time: the cap falls inside
    them. The half call becomes no card, no proposal, no task, and no stored tool call."""
    fake_model.script(Script(text=words(90), tool_calls=[call("create_task", CREATE)]))
    async with running(fake_slack, fake_model, sqlite_url, reply_tokens=100) as bot:
        await bot.mention("C1", "track the login bug", fake_slack)
        await bot.idle()
        (reply,) = fake_slack.bot_messages("C1")
        assert split_note(reply.text) == (words(90), LENGTH_NOTE)
        assert fake_slack.cards("C1") == []
        assert (await rows(bot, Proposal), await rows(bot, Task)) == ([], [])
        stored = await rows(bot, Message)
        assert [m.role for m in stored] == [Role.USER, Role.ASSISTANT]
        assert stored[1].tool_calls is None
    assert len(fake_model.requests) == 1


async def test_calls_cut_at_the_deadline_are_not_run(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    """A read and a write whose arguments stop coming: neither runs, nothing is proposed."""
    fake_model.script(
        Script(
            text="Let me look.",
            tool_calls=[call("list_tasks", {"status": "open"}), call("create_task", CREATE, "c2")],
            hang_after_fragments=3,
        )
    )
    async with running(fake_slack, fake_model, sqlite_url, model_deadline_seconds=1) as bot:
        await bot.mention("C1", "look, then track the bug", fake_slack)
        await bot.idle()
        (reply,) = fake_slack.bot_messages("C1")
        assert split_note(reply.text) == ("Let me look.", DEADLINE_NOTE)
        stored = await rows(bot, Message)
        assert [m.role for m in stored] == [Role.USER, Role.ASSISTANT]
        assert (await rows(bot, Proposal), fake_slack.cards("C1")) == ([], [])
    assert len(fake_model.requests) == 1


async def test_a_resumed_reply_cut_short_is_done_not_resumed_again(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    fake_model.script(
        Script(text="I'll create it.", tool_calls=[call("create_task", CREATE)]),
        Script(text=words(150)),
    )
    async with running(fake_slack, fake_model, sqlite_url, reply_tokens=100) as bot:
        await bot.mention("C1", "track the login bug", fake_slack)
        await bot.idle()
        (card,) = fake_slack.cards("C1")
        assert await bot.click(card, cards.APPROVE, "UALICE", "C1") == 200
        await bot.idle()
        assert len(await rows(bot, Task)) == 1  # the write ran once
        resumed = fake_slack.bot_messages("C1")[-1]
        assert split_note(resumed.text) == (words(100), LENGTH_NOTE)
        (request,) = await rows(bot, ResumeRequest)
        assert request.done_at is not None
        assert is_valid_history(await rows(bot, Message))
    assert len(fake_model.requests) == 2


# -- the deadline's own rules -------------------------------------------------------------------


async def test_a_deadline_cuts_the_read_it_falls_in_and_every_read_after() -> None:
    deadline = Deadline(0.05)
    assert await deadline.read(asyncio.sleep(0, "first")) == "first"
    with pytest.raises(TimeoutError):
        await deadline.read(asyncio.Event().wait())  # never set: only the deadline ends it
    with pytest.raises(TimeoutError):
        await deadline.read(asyncio.sleep(0))
    task = asyncio.current_task()
    assert task is not None
    assert task.cancelling() == 0  # its cancellation was taken back, as asyncio.timeout does


async def test_a_cancel_from_elsewhere_during_a_read_stays_a_cancel() -> None:
    """A Stop or a shutdown cancelling the turn mid-read is not a deadline."""
    deadline = Deadline(60)
    reading = asyncio.create_task(deadline.read(asyncio.Event().wait()))
    await asyncio.sleep(0)
    reading.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reading
    deadline.close()
    assert not deadline.expired


async def test_a_model_that_wants_max_completion_tokens_gets_the_cap_by_that_name(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    """OpenAI's reasoning models refuse `max_tokens` (a 400 naming `max_completion_tokens`):
    the request is made again with that name, and every later one uses it from the start."""
    fake_model.wants_completion_tokens = True
    fake_model.script(Script(text=words(150)), Script(text="Short."))
    async with running(fake_slack, fake_model, sqlite_url, reply_tokens=100) as bot:
        root = await bot.mention("C1", "tell me everything", fake_slack)
        await bot.idle()
        await bot.mention("C1", "briefly", fake_slack, thread_ts=root)
        await bot.idle()
        first, second = fake_slack.bot_messages("C1")
    assert split_note(first.text) == (words(100), LENGTH_NOTE)
    assert second.text == "Short."
    caps = [sorted(set(b) & {"max_tokens", "max_completion_tokens"}) for b in fake_model.bodies]
    assert caps == [["max_tokens"], ["max_completion_tokens"], ["max_completion_tokens"]]
    assert [b["max_completion_tokens"] for b in fake_model.bodies[1:]] == [100, 100]


async def test_a_summary_for_a_model_that_wants_max_completion_tokens_is_asked_again(
    fake_model: FakeOpenAI,
) -> None:
    fake_model.wants_completion_tokens = True
    llm = llm_for(fake_model, max_tokens=100)
    answer = await llm.complete([{"role": "user", "content": "the transcript"}], 50)
    assert answer.text.startswith("SUMMARY#1")
    assert [b.get("max_tokens") for b in fake_model.bodies] == [50, None]
    assert fake_model.bodies[1]["max_completion_tokens"] == 50


@pytest.mark.parametrize("value", ["0", "3601", "soon"])
def test_a_deadline_out_of_range_is_named_with_its_range(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MODEL_DEADLINE_SECONDS", value)
    with pytest.raises(SettingsError) as caught:
        load_settings(slack_bot_token="xoxb-1", openai_api_key="sk-x")
    said = caught.value.render()
    assert "MODEL_DEADLINE_SECONDS is invalid" in said
    assert "1 to 3600" in said


def test_the_deadline_defaults_to_five_minutes_said_in_words() -> None:
    settings = load_settings(slack_bot_token="xoxb-1", openai_api_key="sk-x")
    assert settings.model_deadline_seconds == 300
    assert deadline_note(settings.model_deadline_seconds) == (
        ":scissors: _Stopped here: the model took longer than 5 minutes._"
    )
    assert [length_note(2_000), deadline_note(90), deadline_note(1.5)] == [
        ":scissors: _Stopped here: the reply reached its length limit (2,000 tokens)._",
        ":scissors: _Stopped here: the model took longer than 90 seconds._",
        ":scissors: _Stopped here: the model took longer than 1.5 seconds._",
    ]
