"""The window sent to the model never separates tool calls from their results."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from hypothesis import given
from hypothesis import strategies as st

from bot.conversation.history import build_prompt, is_valid_history, window


@dataclass
class Msg:
    role: str
    content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    slack_user: str | None = None


@st.composite
def conversations(draw: st.DrawFn) -> list[Msg]:
    """Valid histories: user and assistant turns, some assistants calling 1-4 tools."""
    messages: list[Msg] = []
    for turn in range(draw(st.integers(0, 30))):
        kind = draw(st.sampled_from(["user", "text", "tools"]))
        if kind == "user":
            messages.append(Msg("user", f"u{turn}", slack_user="U1"))
        elif kind == "text":
            messages.append(Msg("assistant", f"a{turn}"))
        else:
            ids = [f"call_{turn}_{k}" for k in range(draw(st.integers(1, 4)))]
            calls = [
                {"id": i, "type": "function", "function": {"name": "t", "arguments": "{}"}}
                for i in ids
            ]
            messages.append(Msg("assistant", None, tool_calls=calls))
            messages += [Msg("tool", "result", tool_call_id=i) for i in ids]
    return messages


@given(conversations(), st.integers(min_value=1, max_value=40))
def test_window_is_a_bounded_suffix_that_keeps_tool_pairs(messages: list[Msg], size: int) -> None:
    assert is_valid_history(messages)
    chosen = window(messages, size)
    assert len(chosen) <= size
    assert chosen == messages[len(messages) - len(chosen) :]  # a suffix, in order
    assert is_valid_history(chosen)
    if chosen:
        assert chosen[0].role != "tool"
    # It is the longest such window: only orphaned tool results were dropped.
    dropped = messages[max(0, len(messages) - size) : len(messages) - len(chosen)]
    assert all(m.role == "tool" for m in dropped)


@given(conversations(), st.integers(min_value=1, max_value=40))
def test_prompt_pairs_every_tool_call_with_one_result(messages: list[Msg], size: int) -> None:
    prompt = build_prompt("system", messages, size)
    assert prompt[0] == {"role": "system", "content": "system"}
    expected: list[str] = []
    for message in prompt[1:]:
        if message["role"] == "tool":
            assert expected
            assert expected.pop(0) == message["tool_call_id"]
        else:
            assert expected == []
            calls = cast(list[dict[str, Any]], message.get("tool_calls") or [])
            expected = [c["id"] for c in calls]
    assert expected == []


def test_invalid_histories_are_recognised() -> None:
    call = [{"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{}"}}]
    assert not is_valid_history([Msg("tool", "x", tool_call_id="c1")])
    assert not is_valid_history([Msg("assistant", None, tool_calls=call), Msg("user", "hi")])
    assert is_valid_history(
        [
            Msg("assistant", None, tool_calls=call),
            Msg("tool", "r", tool_call_id="c1"),
            Msg("user", "hi"),
        ]
    )
