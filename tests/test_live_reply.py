"""A mention becomes a placeholder, then progressive edits, then the exact final text."""

from __future__ import annotations

import itertools

from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import BOT_ID, FakeSlack
from tests.harness import RunningBot

SCRIPTED = " ".join(f"word{i}" for i in range(60)) + "."


async def test_mention_streams_placeholder_then_edits_then_exact_text(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Script(text=SCRIPTED, time_to_first_token=0.1, tokens_per_second=15))
    ts = await bot.mention("C1", "tell me sixty words", fake_slack)
    await bot.idle()

    replies = [m for m in fake_slack.thread("C1", ts) if m.bot_id == BOT_ID]
    assert len(replies) == 1
    reply = replies[0]
    assert reply.thread_ts == ts
    assert reply.text == SCRIPTED
    shown = fake_slack.history[reply.ts]
    assert shown[0] == "_Thinking…_"
    progressive = shown[1:-1]
    assert len(progressive) >= 3
    for earlier, later in itertools.pairwise(progressive):
        assert SCRIPTED.startswith(earlier.removesuffix(" ▍"))
        assert len(later) >= len(earlier)
    sent = fake_model.requests[-1].body
    assert sent["stream"] is True
    assert sent["stream_options"] == {"include_usage": True}
    assert sent["messages"][-1] == {
        "role": "user",
        "content": "tell me sixty words",
        "name": "UALICE",
    }
