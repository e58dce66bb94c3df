"""The real `openai` client against the fake server: text deltas, usage, and tool calls
assembled by index from interleaved fragments."""

from __future__ import annotations

import json

import pytest

from bot.config import Settings
from bot.llm import LLM, Finished, LLMError, TextDelta, make_client
from tests.fakes.openai import API_KEY, MODEL, FakeOpenAI, Script, ScriptedToolCall


def llm_for(model: FakeOpenAI, retries: int = 0) -> LLM:
    settings = Settings(
        _env_file=None,
        slack_bot_token="xoxb-x",
        openai_api_key=API_KEY,
        openai_base_url=model.base_url,
        llm_model=MODEL,
        llm_max_retries=retries,
        llm_timeout_seconds=2,
    )
    return LLM(make_client(settings), MODEL)


async def collect(llm: LLM, tools: list[dict[str, object]] | None = None) -> tuple[str, Finished]:
    text, finished = "", None
    async for event in llm.stream([{"role": "user", "content": "hi"}], tools):
        if isinstance(event, TextDelta):
            text += event.text
        else:
            finished = event
    assert finished is not None
    return text, finished


async def test_interleaved_tool_call_fragments_are_assembled_by_index(
    fake_model: FakeOpenAI,
) -> None:
    first = json.dumps({"title": "Fix login bug", "assignee": "U123", "notes": 'é ✓ "q"'})
    second = json.dumps({"query": "open tasks"})
    fake_model.script(
        Script(
            text="Let me check.",
            tool_calls=[
                ScriptedToolCall("call_a", "create_task", first),
                ScriptedToolCall("call_b", "list_tasks", second),
            ],
            argument_fragment_size=3,
        )
    )
    tool: dict[str, object] = {
        "type": "function",
        "function": {"name": "list_tasks", "parameters": {}},
    }
    text, finished = await collect(llm_for(fake_model), [tool])
    assert text == "Let me check."
    assert finished.finish_reason == "tool_calls"
    assert [(c.id, c.name, json.loads(c.arguments)) for c in finished.tool_calls] == [
        ("call_a", "create_task", json.loads(first)),
        ("call_b", "list_tasks", json.loads(second)),
    ]
    assert fake_model.requests[0].body["tools"] == [tool]


async def test_usage_is_reported(fake_model: FakeOpenAI) -> None:
    fake_model.script(Script(text="a b c d", prompt_tokens=9))
    text, finished = await collect(llm_for(fake_model))
    assert text == "a b c d"
    assert finished.usage is not None
    assert (finished.usage.prompt_tokens, finished.usage.completion_tokens) == (9, 4)


@pytest.mark.parametrize(
    ("script", "message"),
    [
        (Script(fail_status=429), "rate limiting"),
        (Script(fail_status=503), "returned an error (503)"),
        (Script(text="a b c d e", cut_after_tokens=2), "broke off"),
        (Script(text="a b c d e", hang_after_tokens=2), "did not answer in time"),
    ],
)
async def test_failures_become_plain_llm_errors(
    fake_model: FakeOpenAI, script: Script, message: str
) -> None:
    fake_model.script(script)
    with pytest.raises(LLMError) as caught:
        await collect(llm_for(fake_model))
    assert message in caught.value.user_message


@pytest.mark.parametrize(
    "raw",
    [
        '{"choices": [{"index": 0, "delta": {"content": 5}}]}',
        '{"choices": "none"}',
        '{"choices": [{"index": 0, "delta": "text"}]}',
        '{"choices": [{"index": 0, "delta": {"tool_calls": {"index": 0}}}]}',
        '{"choices": [{"index": 0, "delta": {"tool_calls": ["call"]}}]}',
        '{"choices": [], "usage": {"prompt_tokens": "many"}}',
        '["not", "an", "object"]',
        '{"error": {"message": "the server is overloaded"}}',
    ],
    ids=["content", "choices", "delta", "calls-object", "call-text", "usage", "array", "error"],
)
async def test_a_chunk_of_the_wrong_shape_is_a_plain_error_not_a_crash(
    fake_model: FakeOpenAI, raw: str
) -> None:
    """Chunks are read as the JSON the server sent, not as the SDK's objects: a server sending
    valid JSON of the wrong shape (or an error event) ends the reply with a plain message."""
    fake_model.script(Script(text="a b c d", raw_after_tokens=(2, raw)))
    with pytest.raises(LLMError) as caught:
        await collect(llm_for(fake_model))
    assert caught.value.user_message == "the model service sent something I could not read"


async def test_tool_calls_from_a_server_that_labels_every_fragment_and_omits_the_index(
    fake_model: FakeOpenAI,
) -> None:
    calls = [
        ScriptedToolCall("c1", "get_task", '{"task_id": 1}'),
        ScriptedToolCall("c2", "get_task", '{"task_id": 2}'),
    ]
    fake_model.script(Script(tool_calls=calls, quirky_tool_calls=True, argument_fragment_size=3))
    _, finished = await collect(llm_for(fake_model), [])
    assert [(c.id, c.name, json.loads(c.arguments)) for c in finished.tool_calls] == [
        ("c1", "get_task", {"task_id": 1}),
        ("c2", "get_task", {"task_id": 2}),
    ]
