"""What a model's stream is made of: the events the bot reads from it (`TextDelta`, then one
`Finished`), and each streamed chunk, the JSON the server sent, read into them (`ChunkReader`:
the text, the tool-call fragments, the finish reason and the usage), strictly: a chunk of
another shape is a `ValueError`, which `bot.llm` reports as the model's failure."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from bot.tool_call_fragments import ToolCall, ToolCallAccumulator


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class Usage:
    """What the server reported a call used. `prompt_tokens` counts the cached ones too;
    `cached_tokens` are those of them it read from its prompt cache (OpenAI's
    `prompt_tokens_details.cached_tokens`; 0 where a server does not say)."""

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0


@dataclass(frozen=True)
class Completed:
    """One non-streamed answer: its text and the usage the server reported (None: none)."""

    text: str
    usage: Usage | None


# How a stream may end short of its answer: the server's finish reason when `max_tokens` was
# reached, and this side's own when `MODEL_DEADLINE_SECONDS` passed (no server sends it).
LENGTH = "length"
DEADLINE = "deadline"


@dataclass(frozen=True)
class Finished:
    finish_reason: str
    tool_calls: list[ToolCall]
    usage: Usage | None
    model: str | None = None  # the model asked (its price is the answer's)

    @property
    def cut(self) -> bool:
        """The answer was cut short (by the token cap or the deadline): its words are all there
        is, and it has no tool calls (one cut mid-arguments is never run)."""
        return self.finish_reason in (LENGTH, DEADLINE)


StreamEvent = TextDelta | Finished


class ChunkReader:
    """One stream's chunks, read in order: what they said so far."""

    def __init__(self) -> None:
        self.calls = ToolCallAccumulator()
        self.finish_reason: str | None = None
        self.usage: Usage | None = None

    def read(self, chunk: object) -> Iterable[TextDelta]:
        """The chunk's text; its tool-call fragments, finish reason and usage are kept."""
        if not isinstance(chunk, dict):
            raise ValueError("a streamed chunk is not an object")
        choice = _first_choice(chunk)
        deltas = _read_delta(choice, self.calls)
        if choice.get("finish_reason"):
            self.finish_reason = str(choice["finish_reason"])
        if isinstance(chunk.get("usage"), dict):
            self.usage = usage_of(chunk["usage"])
        return deltas


def _read_delta(choice: dict[str, Any], accumulator: ToolCallAccumulator) -> Iterable[TextDelta]:
    delta = choice.get("delta")
    if delta is None:
        return ()
    if not isinstance(delta, dict):
        raise ValueError("a streamed delta is not an object")
    if delta.get("tool_calls"):
        if not isinstance(delta["tool_calls"], list):
            raise ValueError("tool_calls is not a list")
        accumulator.add(delta["tool_calls"])
    content = delta.get("content")
    if content is not None and not isinstance(content, str):
        raise ValueError("a streamed content is not text")
    return (TextDelta(content),) if content else ()


def _first_choice(chunk: dict[str, Any]) -> dict[str, Any]:
    choices = chunk.get("choices")
    if not choices:
        return {}
    if not isinstance(choices, list) or not isinstance(choices[0], dict):
        raise ValueError("choices is not a list of objects")
    return choices[0]


def usage_of(usage: dict[str, Any]) -> Usage:
    """The usage a server reported; `ValueError` without its token counts."""
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if not isinstance(prompt, int) or not isinstance(completion, int):
        raise ValueError("usage without token counts")
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    if not isinstance(cached, int) or isinstance(cached, bool):
        cached = 0  # absent, null, or not a count: nothing is priced as cached
    return Usage(prompt, completion, min(max(cached, 0), prompt))
