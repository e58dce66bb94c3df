"""The model's side: one OpenAI-compatible streaming call turned into typed events.

Tool-call fragments are accumulated by `index`, the way OpenAI streams them: the first fragment
of a call carries its id and name, later ones carry pieces of the arguments, and fragments of
several calls may interleave.

The stream's chunks are read as the JSON the server sent (the SDK's `post` with
`cast_to=object`: its transport, retries, time-outs, SSE decoding and error events, without a
pydantic object built per chunk). Building those objects took about two thirds of the event
loop's time with 60 replies streaming at once (40 chunks a second each), which delayed every
reply's refreshes and finals.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx2
import openai
from openai import AsyncOpenAI, AsyncStream
from openai.types.chat import ChatCompletionMessageParam

from bot.config import Settings
from bot.deadlines import Deadline
from bot.metrics import MODEL_ERRORS, MODEL_FIRST_TOKEN

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text as the model produced it; validated by the tool layer

    def as_openai(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int


# How a stream may end short of its answer: the server's finish reason when `max_tokens` was
# reached, and this side's own when `MODEL_DEADLINE_SECONDS` passed (no server sends it).
LENGTH = "length"
DEADLINE = "deadline"


@dataclass(frozen=True)
class Finished:
    finish_reason: str
    tool_calls: list[ToolCall]
    usage: Usage | None

    @property
    def cut(self) -> bool:
        """The answer was cut short (by the token cap or the deadline): its words are all there
        is, and it has no tool calls (one cut mid-arguments is never run)."""
        return self.finish_reason in (LENGTH, DEADLINE)


StreamEvent = TextDelta | Finished


class LLMError(Exception):
    """The model could not produce a complete reply; `user_message` is safe to show."""

    def __init__(self, user_message: str) -> None:
        super().__init__(user_message)
        self.user_message = user_message


class ImagesRefused(LLMError):
    """The model's server refused a request because of its image parts (a model that does not
    take images): `bot.files.parts` then asks again without them."""


# What OpenAI-compatible servers say when a model does not take an image part: OpenAI
# ("Invalid content type. image_url is only supported by certain models."), vLLM ("… is not a
# multimodal model"), others ("does not support image input", "vision").
_ABOUT_IMAGES = re.compile(r"image|multimodal|vision|content type|modalit", re.IGNORECASE)


def _refuses_images(exc: BaseException, messages: Iterable[Any]) -> bool:
    if not isinstance(exc, openai.BadRequestError) or not _has_images(messages):
        return False
    return bool(_ABOUT_IMAGES.search(f"{exc.message} {exc.body}"))


def _has_images(messages: Iterable[Any]) -> bool:
    return any(
        isinstance(m.get("content"), list)
        and any(isinstance(p, dict) and p.get("type") == "image_url" for p in m["content"])
        for m in messages
    )


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class ToolCallAccumulator:
    """Assembles streamed tool-call fragments by index into complete calls.

    Compatible servers differ: some omit `index` for a single call, some repeat the function
    name in every fragment, some send empty or repeated ids. Every assembled call gets an id of
    its own, because each must be answered by exactly one `tool` message.
    """

    def __init__(self) -> None:
        self._calls: dict[int, _PartialCall] = {}

    def add(self, fragments: Iterable[Any]) -> None:
        """Add a chunk's `delta.tool_calls`, as the server sent them (JSON objects)."""
        for fragment in fragments:
            if not isinstance(fragment, dict):
                raise ValueError("a tool-call fragment is not an object")
            index = fragment.get("index")
            fragment_id = fragment.get("id")
            if not isinstance(index, int) or isinstance(index, bool):
                last = max(self._calls, default=None)  # no index: a new id starts the next call
                if last is None:
                    index = 0
                elif fragment_id and fragment_id != self._calls[last].id:
                    index = last + 1
                else:
                    index = last
            call = self._calls.setdefault(index, _PartialCall())
            if isinstance(fragment_id, str) and fragment_id:
                call.id = fragment_id
            function = fragment.get("function")
            if isinstance(function, dict):
                name = function.get("name")
                if isinstance(name, str) and name and name != call.name:
                    call.name += name
                arguments = function.get("arguments")
                if isinstance(arguments, str) and arguments:
                    call.arguments.append(arguments)

    def calls(self) -> list[ToolCall]:
        seen: set[str] = set()
        calls = []
        for _, c in sorted(self._calls.items()):
            call_id = c.id[:100]
            if not call_id or call_id in seen:
                call_id = f"call_cs_{uuid.uuid4().hex[:20]}"
            seen.add(call_id)
            calls.append(
                ToolCall(id=call_id, name=c.name[:128], arguments="".join(c.arguments) or "{}")
            )
        return calls


def make_client(settings: Settings) -> AsyncOpenAI:
    """The SDK client: its own retries (429, 5xx, connection errors) and a read timeout that
    also bounds the silence between two streamed chunks."""
    return AsyncOpenAI(
        api_key=settings.openai_api_key.get_secret_value(),
        base_url=str(settings.openai_base_url) if settings.openai_base_url else None,
        timeout=openai.Timeout(settings.llm_timeout_seconds, connect=10.0),
        max_retries=settings.llm_max_retries,
    )


def _explain(exc: BaseException) -> str:
    if isinstance(exc, openai.APITimeoutError):
        return "the model did not answer in time"
    if isinstance(exc, openai.RateLimitError):
        return "the model service is rate limiting us (429); try again in a minute"
    if isinstance(exc, openai.AuthenticationError):
        return "the model service rejected our API key (check OPENAI_API_KEY)"
    if isinstance(exc, openai.NotFoundError):
        return "the model service does not know this model (check LLM_MODEL)"
    if isinstance(exc, openai.APIStatusError):
        return f"the model service returned an error ({exc.status_code})"
    if isinstance(exc, openai.APIConnectionError | httpx2.TransportError):
        return "the connection to the model service broke off"
    return "the model service sent something I could not read"


class LLM:
    """Streams chat completions from any OpenAI-compatible server.

    Every request is bounded: `max_tokens` (REPLY_TOKENS) goes with each one, and `deadline`
    (MODEL_DEADLINE_SECONDS) bounds it from sending to its last token; the SDK's read time-out
    only bounds each silence. `max_tokens` rather than `max_completion_tokens`: it is the name
    every OpenAI-compatible server takes (Ollama, vLLM, Azure, OpenAI's chat models), and the
    one summaries and titles already send."""

    def __init__(
        self,
        client: AsyncOpenAI,
        model: str,
        max_tokens: int | None = None,
        deadline: float | None = None,
    ) -> None:
        self.client = client
        self.model = model
        self.max_tokens = max_tokens
        self.deadline = deadline

    async def stream(
        self,
        messages: list[ChatCompletionMessageParam],
        tools: list[dict[str, Any]] | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """Yield text deltas as they arrive, then one `Finished`; raise `LLMError` on failure.

        Past the deadline the stream is closed (its connection with it) and the answer ends
        as it stands: `Finished(DEADLINE)`. The deadline cuts only the server's side (the
        request, each next chunk), never the consumer's, which runs at each `yield`."""
        accumulator = ToolCallAccumulator()
        finish_reason: str | None = None
        usage: Usage | None = None
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        if tools:
            body["tools"] = tools
        started, first = time.monotonic(), True
        deadline, timed_out = Deadline(self.deadline), False
        try:
            stream = await deadline.read(
                self.client.post(
                    "/chat/completions",
                    body=body,
                    cast_to=object,
                    stream=True,
                    stream_cls=AsyncStream[object],
                )
            )
            async with stream:
                chunks = stream.__aiter__()
                while True:
                    try:
                        chunk = await deadline.read(anext(chunks))
                    except StopAsyncIteration:
                        break
                    if first:
                        MODEL_FIRST_TOKEN.observe(time.monotonic() - started)
                        first = False
                    if not isinstance(chunk, dict):
                        raise ValueError("a streamed chunk is not an object")
                    choice = _first_choice(chunk)
                    for event in self._read_delta(choice, accumulator):
                        yield event
                    if choice.get("finish_reason"):
                        finish_reason = str(choice["finish_reason"])
                    if isinstance(chunk.get("usage"), dict):
                        usage = _usage(chunk["usage"])
        except Exception as exc:  # any failure, a malformed chunk included, is the model's
            if not (isinstance(exc, TimeoutError) and deadline.expired):
                MODEL_ERRORS.inc()
                if _refuses_images(exc, messages):
                    raise ImagesRefused("the model does not take images") from exc
                raise LLMError(_explain(exc)) from exc
            timed_out = True  # and the stream is closed: `async with` left it
        finally:
            deadline.close()
        if timed_out:
            log.info("model request cut at its deadline (%.0f s)", self.deadline or 0)
            yield Finished(DEADLINE, [], usage)
            return
        if finish_reason is None:
            MODEL_ERRORS.inc()
            raise LLMError("the model's answer was cut off before it finished")
        if finish_reason == LENGTH:  # a call cut at the cap may hold half its arguments
            log.info("model answer cut at max_tokens (%s)", self.max_tokens)
            yield Finished(LENGTH, [], usage)
            return
        yield Finished(finish_reason, accumulator.calls(), usage)

    async def complete(self, messages: list[ChatCompletionMessageParam], max_tokens: int) -> str:
        """One non-streamed answer (summaries, titles) of at most `max_tokens`, within the
        deadline; raises `LLMError`."""
        try:
            async with asyncio.timeout(self.deadline):
                response = await self.client.chat.completions.create(
                    model=self.model, messages=messages, max_tokens=max_tokens
                )
        except TimeoutError as exc:
            raise LLMError("the model took too long to answer") from exc
        except (openai.OpenAIError, httpx2.HTTPError) as exc:
            raise LLMError(_explain(exc)) from exc
        if not response.choices or not response.choices[0].message.content:
            raise LLMError("the model returned an empty summary")
        return response.choices[0].message.content

    @staticmethod
    def _read_delta(
        choice: dict[str, Any], accumulator: ToolCallAccumulator
    ) -> Iterable[TextDelta]:
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


def _usage(usage: dict[str, Any]) -> Usage:
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if not isinstance(prompt, int) or not isinstance(completion, int):
        raise ValueError("usage without token counts")
    return Usage(prompt, completion)
