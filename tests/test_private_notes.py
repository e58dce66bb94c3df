"""Finding 4 of issue 25: a note about an action that ran without a card (a policy rule allowed
it, or a person's grant covered it) printed what the action does into its thread whoever reads
that thread: "…no approval needed: Create task 'Prepare: layoffs on friday'" in a public
channel, from a turn that read the private #exec.

Through the front door: the thread gets no private text (anything the fake Slack showed in C1,
edits included), its note says that an action ran and under which rule or grant, and it links
the details, which open for the requester (entitled to them: the data was read for them) and
for nobody who may not read #exec.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.db.models import ProposalState
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import DEFAULT_MEMBERS, FakeSlack
from tests.harness import RunningBot, make_settings, start_bot, stop_bot
from tests.test_approvals_flow import CREATE, call, proposals, tasks_in_db
from tests.test_audience import SECRET, private_exec, read_exec
from tests.test_grants import POLICY, THREAD, grant_bot, granted

__all__ = ["grant_bot"]  # the fixture, used below by name

ALLOW = """\
version: 1
default: ask
rules:
  - name: prep-tasks
    tools: [create_task]
    outcome: allow
    after_untrusted: allow  # it runs after reading #exec (a tool result), as these tests need
"""
# Grants that cover a call after reading #exec (by default none covers one after a tool result).
GRANTS = POLICY.replace(
    "    grant_expiry: 2h\n", "    grant_expiry: 2h\n    after_untrusted: allow\n"
)
PREPARE = CREATE | {"title": f"Prepare: {SECRET}", "description": SECRET}
LINK = re.compile(r"<(https://[^|>]+)\|the details>")


@pytest.fixture
async def allow_bot(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, tmp_path: Path
) -> AsyncIterator[RunningBot]:
    path = tmp_path / "policy.yaml"
    path.write_text(ALLOW)
    running = await start_bot(make_settings(fake_slack, fake_model, sqlite_url, policy_file=path))
    yield running
    await stop_bot(running)


def shown_in(slack: FakeSlack, channel: str) -> str:
    """Everything Slack showed in `channel`: each message's every text, and its blocks."""
    messages = slack.thread(channel)
    texts = [t for m in messages for t in slack.history.get(m.ts, [m.text])]
    return json.dumps([texts, [m.blocks for m in messages]], ensure_ascii=False)


def open_link(slack: FakeSlack, link: str, user: str) -> str | None:
    """What `user` sees opening a Slack permalink: the message's text, or None where Slack
    would not show it to them (a private channel or DM they are not a member of)."""
    found = re.fullmatch(r"https://test\.slack\.com/archives/(\w+)/p(\d+)", link)
    assert found is not None, link
    channel, digits = found.groups()
    info = slack.channel_info.get(channel, {})
    private = info.get("is_private") or info.get("is_im") or info.get("is_mpim")
    if private and user not in slack.members.get(channel, DEFAULT_MEMBERS):
        return None
    ts = f"{digits[:-6]}.{digits[-6:]}"
    (message,) = [m for m in slack.thread(channel) if m.ts == ts]
    return message.text


async def read_exec_and_track(
    bot: RunningBot,
    slack: FakeSlack,
    model: FakeOpenAI,
    members: tuple[str, ...] = ("UALICE", "UCAROL", "UBOT"),
    **kw: str,
) -> None:
    private_exec(slack)
    slack.members["GEXEC"] = list(members)
    model.script(
        Script(tool_calls=[read_exec()]),
        Script(tool_calls=[call("create_task", PREPARE, "w1")]),
        Script(text=f"Tracked: {SECRET}."),
    )
    await bot.mention("C1", "read GEXEC and track what it says", slack, **kw)
    await bot.idle()


def the_note(slack: FakeSlack, words: str) -> str:
    (note,) = [m.text for m in slack.bot_messages("C1") if words in m.text]
    return note


def assert_only_the_entitled_open(slack: FakeSlack, note: str) -> None:
    (link,) = LINK.findall(note)
    details = open_link(slack, link, "UALICE")
    assert details is not None
    assert f"Prepare: {SECRET}" in details  # what ran, for the person it ran for
    assert open_link(slack, link, "UBOB") is None  # not in #exec: Slack shows him nothing
    assert open_link(slack, link, "UDANA") is None


async def test_an_allowed_action_on_private_data_is_noted_without_it(
    allow_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = allow_bot
    await read_exec_and_track(bot, fake_slack, fake_model)
    (task,) = await tasks_in_db(bot)
    assert task.title == f"Prepare: {SECRET}"  # it ran, without a card
    assert fake_slack.cards("C1") == []

    assert SECRET not in shown_in(fake_slack, "C1")
    note = the_note(fake_slack, "Allowed by policy rule")
    assert "`prep-tasks`" in note
    assert "an action ran" in note
    assert "<@UALICE> privately" in note
    assert_only_the_entitled_open(fake_slack, note)


async def test_an_allowed_action_on_public_data_still_says_what_it_did(
    allow_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Script(tool_calls=[call("create_task", CREATE)]), Script(text="Done."))
    await allow_bot.mention("C1", "track the login bug", fake_slack)
    await allow_bot.idle()
    note = the_note(fake_slack, "Allowed by policy rule")
    assert "Create task 'Fix login bug'" in note
    assert "the details" not in note
    assert fake_slack.bot_messages("DALICE") == []


@pytest.mark.parametrize("grant_bot", [GRANTS], indirect=True)
async def test_a_granted_action_on_private_data_is_noted_without_it(
    grant_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = grant_bot
    thread = await granted(bot, fake_slack, fake_model, THREAD)  # Bob: "for this thread"
    # Bob is in #exec: a grant covers only what its granter may read (tests/test_one_door.py).
    in_exec = ("UALICE", "UBOB", "UCAROL", "UBOT")
    await read_exec_and_track(bot, fake_slack, fake_model, in_exec, thread_ts=thread)
    last = (await proposals(bot))[-1]
    assert last.state == ProposalState.SUCCEEDED
    assert str(last.decided_by).startswith("grant:")
    assert len(fake_slack.cards("C1")) == 1  # the first one, which made the grant

    assert SECRET not in shown_in(fake_slack, "C1")
    note = the_note(fake_slack, "Ran under <@UBOB>'s grant")
    assert "an action ran" in note
    assert_only_the_entitled_open(fake_slack, note)
