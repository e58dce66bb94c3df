"""Long conversations stay within the token budget: older turns become a stored summary, tool
calls and their results stay together, large tool results are cut with a note."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import select

from bot.conversation.history import is_valid_history
from bot.conversation.memory import Budget, Memory
from bot.conversation.tokens import TokenCounter
from bot.conversation.window import budget_start
from bot.db import repositories as repo
from bot.db.migrate import upgrade_to_head
from bot.db.models import ConversationSummary, Role
from bot.db.session import Database
from bot.llm import LLM
from tests.fakes.openai import FakeOpenAI
from tests.test_llm_stream import llm_for

BUDGET = Budget(total=3_000, reply=500, tool_result=300, summary=200)


@given(
    st.lists(
        st.tuples(st.sampled_from(["user", "assistant", "tool"]), st.integers(1, 400)), max_size=60
    ),
    st.integers(50, 5_000),
    st.integers(1, 80),
)
def test_token_window_fits_and_never_starts_with_tool_results(
    messages: list[tuple[str, int]], budget: int, max_messages: int
) -> None:
    roles = [r for r, _ in messages]
    costs = [c for _, c in messages]
    start = budget_start(costs, roles, budget, max_messages)
    assert sum(costs[start:]) <= budget
    assert len(costs) - start <= max_messages
    assert start == len(roles) or roles[start] != "tool"
    # Maximal: one more message would break a limit, or the skipped ones were tool results.
    fits = start
    while fits > 0 and sum(costs[fits - 1 :]) <= budget and len(costs) - fits + 1 <= max_messages:
        fits -= 1
    assert all(r == "tool" for r in roles[fits:start])


@pytest.fixture
async def memory_parts(
    migrated_database_url: str, fake_model: FakeOpenAI
) -> AsyncIterator[tuple[Database, LLM, Memory]]:
    db = Database.from_url(migrated_database_url)
    await upgrade_to_head(db)
    llm = llm_for(fake_model)
    yield db, llm, Memory(db, llm, TokenCounter("gpt-4o-mini"), BUDGET)
    await db.dispose()


async def test_a_300_turn_conversation_stays_within_budget(
    memory_parts: tuple[Database, LLM, Memory], fake_model: FakeOpenAI
) -> None:
    db, _, memory = memory_parts
    counter = TokenCounter("gpt-4o-mini")
    async with db.transaction() as session:
        conversation, _ = await repo.get_or_create_conversation(session, "T", "C", "1.0", "UA")
    sizes = []
    # 300 turns: some ten summaries and 200 turns at the budget's ceiling (500 took twice the
    # time and proved nothing more; bench.history runs longer threads).
    for turn in range(300):
        async with db.transaction() as session:
            await repo.add_message(
                session,
                conversation,
                Role.USER,
                f"turn {turn}: please remember the number {turn * 7}",
                slack_user="UA",
            )
            if turn % 10 == 3:  # now and then a tool round, with a large result
                calls = [
                    {
                        "id": f"c{turn}",
                        "type": "function",
                        "function": {"name": "list_tasks", "arguments": "{}"},
                    }
                ]
                await repo.add_message(
                    session, conversation, Role.ASSISTANT, None, tool_calls=calls
                )
                await repo.add_message(
                    session,
                    conversation,
                    Role.TOOL,
                    json.dumps({"rows": ["x" * 50] * 200}),
                    tool_call_id=f"c{turn}",
                    tool_name="list_tasks",
                )
            await repo.add_message(
                session,
                conversation,
                Role.ASSISTANT,
                f"noted {turn * 7} " + "and some explanation " * 5,
            )
        prompt = await memory.prompt(conversation.id, "You are a bot.", None, 200)
        size = counter.messages(prompt)
        sizes.append(size)
        assert size <= BUDGET.total - BUDGET.reply
        body = [m for m in prompt if m["role"] != "system"]
        assert body[0]["role"] != "tool"
        pending: list[str] = []
        for m in body:  # every call is followed by exactly its results
            if m["role"] == "tool":
                assert m["tool_call_id"] == pending.pop(0)
            else:
                assert pending == []
                calls = cast(list[dict[str, Any]], m.get("tool_calls") or [])
                pending = [str(c["id"]) for c in calls]
        assert all(
            counter.text(str(m["content"])) <= BUDGET.tool_result + 30
            for m in body
            if m["role"] == "tool"
        )
    assert "Summary of the earlier conversation" in str(prompt[1]["content"])
    async with db.transaction() as session:
        summaries = (await session.scalars(select(ConversationSummary))).all()
    assert len(summaries) >= 5
    assert len(summaries) < 200  # summarised now and then, not on every turn
    assert all(s.tokens_after < s.tokens_before for s in summaries)
    assert fake_model.summaries  # the model wrote them
    assert "truncated for the model" in fake_model.summaries[0]
    # Flat once the budget is reached.
    assert max(sizes[100:]) <= BUDGET.total - BUDGET.reply
    assert max(sizes[200:]) - min(sizes[200:]) < BUDGET.total


async def test_stored_history_is_valid_after_summaries(
    memory_parts: tuple[Database, LLM, Memory],
) -> None:
    db, _, memory = memory_parts
    async with db.transaction() as session:
        conversation, _ = await repo.get_or_create_conversation(session, "T", "C", "2.0", "UA")
        for _ in range(200):
            await repo.add_message(session, conversation, Role.USER, "hello " * 30)
            await repo.add_message(session, conversation, Role.ASSISTANT, "hi " * 30)
    prompt = await memory.prompt(conversation.id, "sys", None, 200)
    async with db.transaction() as session:
        stored = await repo.all_messages(session, conversation.id)
    assert is_valid_history(stored)
    assert prompt[1]["role"] == "system"


async def test_the_newest_message_stays_in_the_window_however_large(
    memory_parts: tuple[Database, LLM, Memory],
) -> None:
    """An 8.8k-token paste into a 3k budget: the model still gets (the start of) the paste,
    not just the system prompt and a summary."""
    db, _llm, memory = memory_parts
    paste = " ".join(f"line{i} of the log" for i in range(2_200))  # about 8.8k tokens
    async with db.transaction() as session:
        conversation, _ = await repo.get_or_create_conversation(session, "T", "C", "1.0", "UA")
        await repo.add_message(session, conversation, Role.USER, "hello", slack_user="UA")
        await repo.add_message(session, conversation, Role.ASSISTANT, "hi")
        await repo.add_message(session, conversation, Role.USER, paste, slack_user="UA")
    prompt = await memory.prompt(conversation.id, "system", None, 200)
    last = cast(dict[str, Any], prompt[-1])
    assert last["role"] == "user"
    assert str(last["content"]).startswith("line0 of the log line1")
    assert "[cut for the model" in str(last["content"])
    counter = TokenCounter("gpt-4o-mini")
    assert counter.messages(prompt) <= BUDGET.total - BUDGET.reply


async def test_the_summariser_keeps_the_newest_part_of_an_overlong_transcript(
    memory_parts: tuple[Database, LLM, Memory], fake_model: FakeOpenAI
) -> None:
    db, _llm, memory = memory_parts
    async with db.transaction() as session:
        conversation, _ = await repo.get_or_create_conversation(session, "T", "C", "2.0", "UA")
        for i in range(12):
            words = " ".join(f"marker{i}" for _ in range(300))
            await repo.add_message(session, conversation, Role.USER, words, slack_user="UA")
            await repo.add_message(session, conversation, Role.ASSISTANT, f"noted {i}")
    await memory.prompt(conversation.id, "system", None, 200)
    transcript = fake_model.summaries[-1]
    summarised = sorted({int(w[6:]) for w in transcript.split() if w.startswith("marker")})
    assert summarised  # something was summarised
    # What was cut is the oldest part: the summarised markers run up to the newest summarised
    # message without a gap.
    assert summarised == list(range(summarised[0], summarised[-1] + 1))
    assert summarised[0] > 0


async def test_the_history_budget_follows_the_tools_offered(
    memory_parts: tuple[Database, LLM, Memory],
) -> None:
    """The system prompt and tool schemas are counted once per set: a set offered later (an
    MCP server's tools arrived, or left) is counted afresh, and a set offered again is the
    same count, however often the schemas are handed over."""
    _, _, memory = memory_parts

    def tool(name: str, words: int) -> dict[str, object]:
        described = " ".join(["word"] * words)
        return {"type": "function", "function": {"name": name, "description": described}}

    small = [tool("a", 5)]
    large = [tool("a", 5), tool("b", 400)]
    alone = memory._fixed_cost("You help.", None)
    with_small = memory._fixed_cost("You help.", small)
    with_large = memory._fixed_cost("You help.", large)
    assert alone < with_small < with_large
    assert with_large - with_small > 350  # the second tool's 400 words
    assert memory._fixed_cost("You help.", list(small)) == with_small  # the same schemas
    assert memory._fixed_cost("You help.", [tool("a", 5)]) == with_small  # equal ones
    assert memory._fixed_cost("You help a lot more.", small) > with_small  # another prompt
