"""The model's side: one OpenAI-compatible streaming call turned into typed events (its
tool-call fragments are assembled by `bot.tool_call_fragments`).

The stream's chunks are read as the JSON the server sent (the SDK's `post` with
`cast_to=object`: its transport, retries, time-outs, SSE decoding and error events, without a
pydantic object built per chunk). Building those objects took about two thirds of the event
loop's time with 60 replies streaming at once (40 chunks a second each), which delayed every
reply's refreshes and finals.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import openai
from openai import AsyncOpenAI, AsyncStream
from openai.types.chat import ChatCompletion, ChatCompletionMessageParam

from bot.config import Settings
from bot.deadlines import Deadline
from bot.metrics import MODEL_ERRORS, MODEL_FIRST_TOKEN
from bot.model_chunks import DEADLINE as DEADLINE
from bot.model_chunks import LENGTH as LENGTH
from bot.model_chunks import ChunkReader, usage_of
from bot.model_chunks import Completed as Completed
from bot.model_chunks import Finished as Finished
from bot.model_chunks import StreamEvent as StreamEvent
from bot.model_chunks import TextDelta as TextDelta
from bot.model_chunks import Usage as Usage
from bot.model_errors import ImagesRefused as ImagesRefused
from bot.model_errors import LLMError as LLMError
from bot.model_errors import explain, refuses_images, wants_completion_tokens
from bot.tool_call_fragments import ToolCall as ToolCall

log = logging.getLogger(__name__)


# Once the answer's finish reason came, a server sends its usage and `[DONE]` at once; one that
# never ends the stream (nor closes it) is waited for this long, then the answer, whole, is kept.
AFTER_FINISH_SECONDS = 2.0


def make_client(settings: Settings) -> AsyncOpenAI:
    """The SDK client: its own retries (429, 5xx, connection errors) and a read timeout that
    also bounds the silence between two streamed chunks. Its transport is aiohttp (the SDK's
    `DefaultAioHttpClient`; aiohttp is already the Slack SDK's): reading a stream through the
    default httpx2/httpcore2/anyio stack took two thirds of the bot's CPU at 60 replies at once
    (per chunk a timeout scope and a reader added and removed); bench/stream.py 117-128 ms of
    CPU per reply before, 67-76 ms after."""
    return AsyncOpenAI(
        api_key=settings.openai_api_key.get_secret_value(),
        base_url=str(settings.openai_base_url) if settings.openai_base_url else None,
        timeout=openai.Timeout(settings.llm_timeout_seconds, connect=10.0),
        max_retries=settings.llm_max_retries,
        http_client=openai.DefaultAioHttpClient(),
    )


class LLM:
    """Streams chat completions from any OpenAI-compatible server.

    Every request is bounded: `max_tokens` (REPLY_TOKENS) goes with each one, and `deadline`
    (MODEL_DEADLINE_SECONDS) bounds it from sending to its last token; the SDK's read time-out
    only bounds each silence.

    The cap goes as `max_tokens`, the name every OpenAI-compatible server takes (Ollama, vLLM,
    LM Studio, OpenAI's and Azure's chat models). OpenAI's reasoning models (o-series, GPT-5
    and later) refuse it with a 400 asking for `max_completion_tokens`: the request is then
    made again with that name, which this client keeps using from then on."""

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
        self.cap_name = "max_tokens"  # or "max_completion_tokens", once the server asked for it

    async def stream(
        self,
        messages: list[ChatCompletionMessageParam],
        tools: list[dict[str, Any]] | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """Yield text deltas as they arrive, then one `Finished`; raise `LLMError` on failure.

        Past the deadline the stream is closed (its connection with it) and the answer ends
        as it stands: `Finished(DEADLINE)`. The deadline cuts only the server's side (the
        request, each next chunk), never the consumer's, which runs at each `yield`."""
        reader = ChunkReader()
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self.max_tokens is not None:
            body[self.cap_name] = self.max_tokens
        if tools:
            body["tools"] = tools
        started, first = time.monotonic(), True
        deadline, timed_out = Deadline(self.deadline), False
        try:
            stream = await deadline.read(self._open(body))
            async with stream:
                chunks = stream.__aiter__()
                while (chunk := await _next(chunks, deadline, reader.finish_reason)) is not _END:
                    if first:
                        MODEL_FIRST_TOKEN.observe(time.monotonic() - started)
                        first = False
                    for event in reader.read(chunk):
                        yield event
        except Exception as exc:  # any failure, a malformed chunk included, is the model's
            if not (isinstance(exc, TimeoutError) and deadline.expired):
                MODEL_ERRORS.inc()
                if refuses_images(exc, messages):
                    raise ImagesRefused("the model does not take images") from exc
                raise LLMError(explain(exc)) from exc
            timed_out = True  # and the stream is closed: `async with` left it
        finally:
            deadline.close()
        usage = reader.usage
        if timed_out:
            log.info("model request cut at its deadline (%.0f s)", self.deadline or 0)
            yield Finished(DEADLINE, [], usage, self.model)
            return
        if reader.finish_reason is None:
            MODEL_ERRORS.inc()
            raise LLMError("the model's answer was cut off before it finished")
        if reader.finish_reason == LENGTH:  # a call cut at the cap may hold half its arguments
            log.info("model answer cut at max_tokens (%s)", self.max_tokens)
            yield Finished(LENGTH, [], usage, self.model)
            return
        yield Finished(reader.finish_reason, reader.calls.calls(), usage, self.model)

    async def complete(
        self, messages: list[ChatCompletionMessageParam], max_tokens: int
    ) -> Completed:
        """One non-streamed answer (summaries, titles) of at most `max_tokens`, within the
        deadline, with the usage the server reported (its budget settles to it); raises
        `LLMError`."""
        try:
            async with asyncio.timeout(self.deadline):
                try:
                    response = await self._create(messages, max_tokens)
                except openai.BadRequestError as exc:
                    if not self._cap_renamed(exc):
                        raise
                    response = await self._create(messages, max_tokens)
        except TimeoutError as exc:
            raise LLMError("the model took too long to answer") from exc
        except (openai.OpenAIError, httpx2.HTTPError) as exc:
            raise LLMError(explain(exc)) from exc
        if not response.choices or not response.choices[0].message.content:
            raise LLMError("the model returned an empty summary")
        reported = response.usage
        usage = None
        if reported is not None:
            try:
                usage = usage_of(reported.model_dump())
            except ValueError:  # a server's odd usage: the call is counted here instead
                usage = None
        return Completed(response.choices[0].message.content, usage)

    async def _open(self, body: dict[str, Any]) -> AsyncStream[object]:
        """Send a streamed request (again with the cap's other name if the server asks)."""
        try:
            return await self._post(body)
        except openai.BadRequestError as exc:
            if "max_tokens" not in body or not self._cap_renamed(exc):
                raise
        body[self.cap_name] = body.pop("max_tokens")
        return await self._post(body)

    async def _post(self, body: dict[str, Any]) -> AsyncStream[object]:
        return await self.client.post(
            "/chat/completions",
            body=body,
            cast_to=object,
            stream=True,
            stream_cls=AsyncStream[object],
        )

    async def _create(
        self, messages: list[ChatCompletionMessageParam], max_tokens: int
    ) -> ChatCompletion:
        if self.cap_name == "max_completion_tokens":
            return await self.client.chat.completions.create(
                model=self.model, messages=messages, max_completion_tokens=max_tokens
            )
        return await self.client.chat.completions.create(
            model=self.model, messages=messages, max_tokens=max_tokens
        )

    def _cap_renamed(self, exc: openai.BadRequestError) -> bool:
        """True if the server wants the cap as `max_completion_tokens` and this client sent
        `max_tokens` until now: it sends the other name from now on."""
        if self.cap_name != "max_tokens" or not wants_completion_tokens(exc):
            return False
        log.info("model %s takes max_completion_tokens, not max_tokens: asking again", self.model)
        self.cap_name = "max_completion_tokens"
        return True


_END = object()  # the stream ended


async def _next(chunks: AsyncIterator[object], deadline: Deadline, finished: str | None) -> object:
    """The stream's next chunk, within the deadline; `_END` once it ends. After the answer's
    finish reason (`finished`) it is waited for `AFTER_FINISH_SECONDS` at most, and a stream
    that hangs or breaks then ends the answer as it stands: it is whole (at worst its usage is
    lost, which the budget then counts itself)."""
    try:
        if finished is None:
            return await deadline.read(anext(chunks))
        async with asyncio.timeout(AFTER_FINISH_SECONDS):
            return await deadline.read(anext(chunks))
    except StopAsyncIteration:
        return _END
    except Exception as exc:
        if finished is None:
            raise
        log.info("model stream did not end after its answer: %r", exc)
        return _END
