"""Files and images shared in a thread are context (issue 27, part 1), through the front
door: Slack's events and file host (the fakes), the bot over HTTP, and what the model
actually received."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import select

from bot.db.models import Message
from bot.membership import reach_of
from bot.provenance import source_of
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import BOT_USER_ID, FakeSlack
from tests.files_samples import pdf, png
from tests.harness import RunningBot, make_settings, start_bot, stop_bot

CSV = b"region,revenue\nnorth,1200\nsouth,3400\n"
LOG = b"12:01 INFO started\n12:03 ERROR disk full on db-2\n"
PICTURE = png(800, 600)


def sent(model: FakeOpenAI, index: int = -1) -> str:
    return json.dumps(model.requests[index].body, ensure_ascii=False)


def image_parts(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        part
        for m in body["messages"]
        if isinstance(m.get("content"), list)
        for part in m["content"]
        if part.get("type") == "image_url"
    ]


async def stored_files(bot: RunningBot) -> list[Message]:
    async with bot.countersign.db.transaction() as session:
        rows = await session.scalars(select(Message).where(Message.file_id.is_not(None)))
        return list(rows)


async def test_an_image_a_csv_a_pdf_and_a_log_are_read_from_the_thread(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    files = fake_slack.files
    root = fake_slack.add_user_message("C1", "the incident", user="UBOB")
    shared = [
        files.add("screen.png", PICTURE, "image/png", user="UBOB"),
        files.add("sales.csv", CSV, "text/csv", user="UBOB"),
        files.add("q3.pdf", pdf("Quarterly revenue was 4.2 million"), "application/pdf", "UBOB"),
    ]
    files.share("C1", shared, text="see attached", user="UBOB", thread_ts=root)
    fake_model.script(Script(text="South sold 3400; Q3 revenue was 4.2 million."))
    # Alice calls the bot into the thread: the earlier message's files come with it.
    await bot.mention("C1", "what do these say?", fake_slack, thread_ts=root)
    await bot.idle()

    body = fake_model.requests[-1].body
    assert "south,3400" in sent(fake_model)
    assert "Quarterly revenue was 4.2 million" in sent(fake_model)
    (part,) = image_parts(body)
    assert part["image_url"]["url"].startswith("data:image/png;base64,")
    assert fake_model.images_seen == [PICTURE]  # the very bytes shared
    # The question stays the newest message; the files come before it.
    assert "what do these say?" in str(body["messages"][-1]["content"])
    # Each file is its own message: a file's source, the sharer, the channel's audience.
    rows = await stored_files(bot)
    sources = [source_of(r.source) for r in rows]
    assert [(s.kind, s.name, s.author) for s in sources if s] == [
        ("file", "screen.png", "UBOB"),
        ("file", "sales.csv", "UBOB"),
        ("file", "q3.pdf", "UBOB"),
    ]
    assert {r.audience for r in rows} == {"C:C1"}
    assert all(s and s.link and "/files/" in s.link for s in sources)
    downloads = len(files.requests)

    # A mention that carries a file of its own: its app_mention lists it, as Slack's does, and
    # the bot reads no message from Slack to find it. The earlier files are not downloaded
    # again.
    log = files.add("app.log", LOG, "text/plain")
    text = f"<@{BOT_USER_ID}> what failed?"
    ts = files.share("C1", [log], text=text, thread_ts=root)
    listed = files.share_event("C1", ts)["files"]
    event = {"type": "app_mention", "user": "UALICE", "text": text, "ts": ts, "files": listed}
    reads = len([c for c in fake_slack.calls if c.method.startswith("conversations.")])
    await bot.send_event({**event, "channel": "C1", "event_ts": ts, "thread_ts": root})
    await bot.idle()
    assert "ERROR disk full on db-2" in sent(fake_model)
    assert len([c for c in fake_slack.calls if c.method.startswith("conversations.")]) == reads
    assert len(files.requests) == downloads + 2  # the log only: url_private and its redirect
    assert fake_model.images_seen == [PICTURE, PICTURE]  # still in the thread's prompt


async def test_a_refused_image_is_retried_without_it_and_the_model_remembered(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.refuse_images = True
    shot = fake_slack.files.add("chart.png", PICTURE, "image/png")
    ts = fake_slack.files.share("DALICE", [shot], text="what is in this chart?")
    fake_model.script(Script(text="I can only see its name."), Script(text="Still no image."))
    await bot.send_event(fake_slack.files.share_event("DALICE", ts))  # a file_share message
    await bot.idle()
    first, retried = fake_model.requests[-2:]
    assert image_parts(first.body)
    assert not image_parts(retried.body)
    reply = fake_slack.bot_messages("DALICE")[-1].text
    assert "chart.png was not read" in reply
    assert "I can only see its name." in reply

    before = len(fake_model.requests)
    await bot.say(fake_slack, "DALICE", "and now?")
    await bot.idle()
    assert len(fake_model.requests) == before + 1  # remembered: no image sent, no refusal
    assert not image_parts(fake_model.requests[-1].body)
    assert "The image was not shown" in sent(fake_model)


async def test_a_private_channels_file_never_reaches_a_non_members_prompt(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_slack.channel_info["GEXEC"] = {"id": "GEXEC", "name": "exec", "is_private": True}
    fake_slack.members["GEXEC"] = ["UALICE", "UBOT"]
    plan = fake_slack.files.add("plan.csv", b"name,leaving\ncarol,friday\n", "text/csv")
    shot = fake_slack.files.add("org.png", PICTURE, "image/png")
    root = fake_slack.add_user_message("GEXEC", "plans", user="UALICE")
    ts = fake_slack.files.share("GEXEC", [plan, shot], text="", thread_ts=root)
    await bot.send_event(fake_slack.files.share_event("GEXEC", ts))
    fake_model.script(Script(text="Carol leaves on Friday."))
    await bot.mention("GEXEC", "who is leaving?", fake_slack, thread_ts=root)
    await bot.idle()
    assert "carol,friday" in sent(fake_model)  # Alice, a member, reads it
    assert fake_model.images_seen == [PICTURE]
    rows = await stored_files(bot)
    assert {r.audience for r in rows} == {"C:GEXEC"}

    # Bob is no member: a prompt of his, in any conversation that holds these messages,
    # has neither the file, nor the image, nor the answer drawn from them.
    conversations = bot.countersign.conversations
    reach = reach_of(bot.countersign.slack)
    (conversation_id,) = {r.conversation_id for r in rows}
    for user, sees in (("UBOB", False), ("UALICE", True)):
        prompt = await conversations.memory.prompt_for(
            conversation_id,
            "system",
            None,
            200,
            lambda audience, user=user: reach.may_read(user, audience),  # type: ignore[misc]
        )
        said = json.dumps(prompt.messages)
        assert ("carol" in said.lower()) is sees
        assert ("org.png" in said) is sees
        assert bool(image_parts({"messages": prompt.messages})) is sees


@pytest.fixture
async def no_vision_bot(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> AsyncIterator[RunningBot]:
    running = await start_bot(make_settings(fake_slack, fake_model, sqlite_url, vision="off"))
    yield running
    await stop_bot(running)


async def test_vision_off_names_the_image_and_sends_no_part(
    no_vision_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    shot = fake_slack.files.add("diagram.png", PICTURE, "image/png")
    ts = fake_slack.files.share("DALICE", [shot], text="")  # a file alone is a message too
    await no_vision_bot.send_event(fake_slack.files.share_event("DALICE", ts))
    await no_vision_bot.idle()
    assert not image_parts(fake_model.requests[-1].body)
    assert fake_model.images_seen == []
    said = sent(fake_model)
    assert "diagram.png: an image (PNG, 800×600" in said
    assert "VISION=off" in said
