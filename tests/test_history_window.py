"""The window sent to the model never separates tool calls from their results, whatever the
conversation, the token costs and the limits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from bot.conversation.history import PENDING, is_valid_history, to_openai
from bot.conversation.window import budget_start


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


@given(conversations(), st.data(), st.integers(1, 400), st.integers(1, 40))
def test_window_is_a_bounded_suffix_that_keeps_tool_pairs(
    messages: list[Msg], data: st.DataObject, budget: int, max_messages: int
) -> None:
    assert is_valid_history(messages)
    costs = [data.draw(st.integers(1, 60)) for _ in messages]
    start = budget_start(costs, [m.role for m in messages], budget, max_messages)
    chosen = messages[start:]
    assert sum(costs[start:]) <= budget
    assert len(chosen) <= max_messages
    assert is_valid_history(chosen)  # no result without its call, no call without results
    if chosen:
        assert chosen[0].role != "tool"


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


def test_a_result_still_waiting_for_approval_tells_the_model_so() -> None:
    message = to_openai(Msg("tool", None, tool_call_id="c1"))
    assert message == {"role": "tool", "tool_call_id": "c1", "content": PENDING}
    assert to_openai(Msg("user", "hi", slack_user="U1")) == {
        "role": "user",
        "content": "hi",
        "name": "U1",
    }
