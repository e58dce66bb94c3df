"""A fake OpenAI-compatible server: real HTTP (SSE) on 127.0.0.1 for the real `openai` client.

Each request to `/v1/chat/completions` takes the next `Script` (or the default one) and plays it
(a retried request takes the next one, so three failures in a row are three scripts):
time to first token, a token rate, text, tool calls streamed in fragments (interleaved by index),
usage, and failures: an HTTP status for the first N attempts, a stream cut off after N tokens,
or a hang. Every request body is recorded with its arrival time.

Like OpenAI, a stream honours the request's `max_tokens` (or `max_completion_tokens`): once
that many tokens are sent (a text token or a tool-call fragment counts as one) it stops where
it is, even inside a tool call's arguments, and ends with `finish_reason` "length".
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import re
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakes.server import ThreadedServer

API_KEY = "sk-test-key-0000"
MODEL = "fake-model"


def tokens_of(text: str) -> list[str]:
    """Split text into word-sized tokens that join back to exactly `text`."""
    return re.findall(r"\s*\S+|\s+", text)


@dataclass(frozen=True)
class ScriptedToolCall:
    id: str
    name: str
    arguments: str


@dataclass
class Script:
    text: str = ""
    tool_calls: list[ScriptedToolCall] = field(default_factory=list)
    time_to_first_token: float = 0.0
    tokens_per_second: float | None = None  # None: as fast as possible
    fail_status: int | None = None  # answer this HTTP status instead of streaming
    cut_after_tokens: int | None = None  # drop the connection after this many tokens
    hang_after_tokens: int | None = None  # stop sending (without closing) after this many
    prompt_tokens: int = 42
    argument_fragment_size: int = 5
    # after this many tokens, send this raw SSE `data:` payload (malformed on purpose)
    raw_after_tokens: tuple[int, str] | None = None
    # like some compatible servers: no `index`, the name and id repeated in every fragment
    quirky_tool_calls: bool = False
    hang_after_fragments: int | None = None  # stop sending (not closing) after this many
    reports_usage: bool = True  # False: like servers that ignore `stream_options`
    cached_tokens: int | None = None  # reported as `prompt_tokens_details.cached_tokens`
    # the whole answer and its usage sent, then no `[DONE]` and the stream left open (a server
    # or proxy that never ends the stream)
    hang_before_done: bool = False


@dataclass(frozen=True)
class Completion:
    """A scripted non-streamed answer: its text, after a delay, or an HTTP error."""

    text: str = ""
    delay: float = 0.0
    fail_status: int | None = None
    prompt_tokens: int = 20  # the usage it reports
    cached_tokens: int | None = None  # reported as `prompt_tokens_details.cached_tokens`
    reports_usage: bool = True  # False: no `usage` in the answer (some compatible servers)


@dataclass(frozen=True)
class Received:
    body: dict[str, Any]
    at: float


@dataclass
class Played:
    """When one scripted stream sent its first and last text token (time.monotonic())."""

    text: str
    first_token_at: float | None = None
    last_token_at: float | None = None
    token_times: list[tuple[float, int]] = field(default_factory=list)  # (sent at, chars so far)
    tokens: int = 0  # how many tokens the script has
    disconnected_at: float | None = None  # the client went away before the end


# What OpenAI answers when a model that takes no images is sent an image part.
IMAGE_REFUSAL = {
    "error": {
        "message": "Invalid content type. image_url is only supported by certain models.",
        "type": "invalid_request_error",
        "param": "messages.[1].content.[1].type",
        "code": None,
    }
}


# What OpenAI answers when `max_tokens` is sent to a model that takes only
# `max_completion_tokens` (its reasoning models, GPT-5 and later).
CAP_REFUSAL = {
    "error": {
        "message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
        "Use 'max_completion_tokens' instead.",
        "type": "invalid_request_error",
        "param": "max_tokens",
        "code": "unsupported_parameter",
    }
}


def images_in(body: dict[str, Any]) -> list[bytes]:
    """The images of a request's image parts (base64 `data:` URLs), decoded."""
    found: list[bytes] = []
    for message in body.get("messages") or []:
        content = message.get("content")
        for part in content if isinstance(content, list) else []:
            if isinstance(part, dict) and part.get("type") == "image_url":
                url = str((part.get("image_url") or {}).get("url", ""))
                found.append(base64.b64decode(url.split(",", 1)[1]))
    return found


class _Capped(Exception):
    """The stream reached the request's `max_tokens`."""


class _Hung(Exception):
    """A scripted hang was released: the stream ends without another byte."""


class FakeOpenAI:
    def __init__(self, default: Script | None = None) -> None:
        self.default = default or Script(text="Hello from the fake model.")
        self.requests: list[Received] = []  # streamed requests
        self.bodies: list[dict[str, Any]] = []  # every request's body, streamed or not
        self.played: list[Played] = []
        self.summaries: list[str] = []
        self._scripts: deque[Script] = deque()
        self._by_prompt: dict[str, Script] = {}
        self._scripted_completions: dict[str, Completion] = {}
        self.completions: list[dict[str, Any]] = []  # non-streamed requests answered by them
        # Image parts received (`data:` URLs decoded), in order; `refuse_images`: answer a
        # request holding one with OpenAI's 400 for a model that takes no images.
        self.images_seen: list[bytes] = []
        self.refuse_images = False
        # Like OpenAI's reasoning models: refuse `max_tokens`, take `max_completion_tokens`.
        self.wants_completion_tokens = False
        self._lock = threading.Lock()
        self._hangs: list[asyncio.Event] = []
        self._server = ThreadedServer(self._build())

    def start(self) -> FakeOpenAI:
        self._server.start()
        return self

    def stop(self) -> None:
        self.release_hangs()
        self._server.stop()

    @property
    def base_url(self) -> str:
        return f"{self._server.url}/v1"

    def script(self, *scripts: Script) -> None:
        with self._lock:
            self._scripts.extend(scripts)

    def script_for(self, prompt_contains: str, script: Script) -> None:
        """Play `script` for the request whose last user message contains the given text
        (for concurrent requests, whose order is not known in advance)."""
        with self._lock:
            self._by_prompt[prompt_contains] = script

    def complete_for(self, prompt_contains: str, completion: Completion) -> None:
        """Answer non-streamed requests whose messages contain the given text this way
        (all others are answered as summaries)."""
        with self._lock:
            self._scripted_completions[prompt_contains] = completion

    def release_hangs(self) -> None:
        for event in self._hangs:
            self._server.loop.call_soon_threadsafe(event.set)

    def _build(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._completions)
        app.router.add_get("/v1/models", self._models)
        return app

    async def _models(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {API_KEY}":
            return web.json_response({"error": {"message": "bad key"}}, status=401)
        return web.json_response(
            {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "fake"}]}
        )

    def _next_script(self, body: dict[str, Any]) -> Script:
        users = [m for m in body.get("messages", []) if m.get("role") == "user"]
        last = str(users[-1].get("content", "")) if users else ""
        with self._lock:
            for key, script in self._by_prompt.items():
                if key in last:
                    return script
            return self._scripts.popleft() if self._scripts else self.default

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.bodies.append(body)
        if body.get("stream"):
            self.requests.append(Received(body, time.monotonic()))
        if request.headers.get("Authorization") != f"Bearer {API_KEY}":
            return web.json_response({"error": {"message": "bad key"}}, status=401)
        if self.wants_completion_tokens and "max_tokens" in body:
            return web.json_response(CAP_REFUSAL, status=400)
        if not body.get("stream"):
            said = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
            scripted = next((c for k, c in self._scripted_completions.items() if k in said), None)
            if scripted is None:
                return web.json_response(self._summary(body))
            self.completions.append(body)
            await asyncio.sleep(scripted.delay)
            if scripted.fail_status is not None:
                return web.json_response(
                    {"error": {"message": "scripted failure", "type": "server_error"}},
                    status=scripted.fail_status,
                )
            answer = self._answer(body, scripted.text, scripted.prompt_tokens)
            if scripted.cached_tokens is not None:
                answer["usage"]["prompt_tokens_details"] = {"cached_tokens": scripted.cached_tokens}
            if not scripted.reports_usage:
                del answer["usage"]
            return web.json_response(answer)
        images = images_in(body)
        self.images_seen.extend(images)
        if images and self.refuse_images:
            return web.json_response(IMAGE_REFUSAL, status=400)
        script = self._next_script(body)
        if script.fail_status is not None:
            return web.json_response(
                {"error": {"message": "scripted failure", "type": "server_error"}},
                status=script.fail_status,
            )
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await self._play(script, body, request, response)
        return response

    def _summary(self, body: dict[str, Any]) -> dict[str, Any]:
        """Non-streamed requests are summaries here: answer with a short, checkable text."""
        transcript = str(body["messages"][-1]["content"])
        self.summaries.append(transcript)
        text = f"SUMMARY#{len(self.summaries)} of {len(transcript)} characters"
        return self._answer(body, text, len(transcript) // 4)

    @staticmethod
    def _answer(body: dict[str, Any], text: str, prompt_tokens: int = 20) -> dict[str, Any]:
        return {
            "id": "chatcmpl-summary",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", MODEL),
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": text},
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": 8,
                "total_tokens": prompt_tokens + 8,
            },
        }

    async def _play(
        self,
        script: Script,
        body: dict[str, Any],
        request: web.Request,
        response: web.StreamResponse,
    ) -> None:
        created = int(time.time())

        async def send(delta: dict[str, Any], finish: str | None = None) -> None:
            chunk = {
                "id": "chatcmpl-fake",
                "object": "chat.completion.chunk",
                "created": created,
                "model": body.get("model", MODEL),
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            try:
                await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
            except ConnectionError:
                played.disconnected_at = time.monotonic()
                raise

        cap = body.get("max_tokens") or body.get("max_completion_tokens")
        sent = fragments = 0

        async def emit(delta: dict[str, Any]) -> None:
            """Send one token's delta (a text token, a tool-call fragment) within the cap."""
            nonlocal sent, fragments
            if isinstance(cap, int) and sent >= cap:
                raise _Capped
            if "tool_calls" in delta:
                if fragments == script.hang_after_fragments:
                    await self._hang()
                fragments += 1
            sent += 1
            await send(delta)

        tokens = tokens_of(script.text)
        played = Played(script.text, tokens=len(tokens))
        self.played.append(played)
        await asyncio.sleep(script.time_to_first_token)
        interval = 1 / script.tokens_per_second if script.tokens_per_second else 0.0
        await send({"role": "assistant", "content": ""})
        start = time.monotonic()
        try:
            await self._play_tokens(
                script, tokens, played, (interval, start), request, response, emit
            )
            await self._send_tool_calls(script, emit)
        except _Hung:
            return
        except _Capped:
            finish = "length"
        else:
            finish = "tool_calls" if script.tool_calls else "stop"
        await send({}, finish)
        if script.reports_usage and (body.get("stream_options") or {}).get("include_usage"):
            completion = sent if finish == "length" else len(tokens)
            usage_chunk = {
                "id": "chatcmpl-fake",
                "object": "chat.completion.chunk",
                "created": created,
                "model": body.get("model", MODEL),
                "choices": [],
                "usage": {
                    "prompt_tokens": script.prompt_tokens,
                    "completion_tokens": completion,
                    "total_tokens": script.prompt_tokens + completion,
                },
            }
            if script.cached_tokens is not None:
                details = {"cached_tokens": script.cached_tokens}
                usage_chunk["usage"]["prompt_tokens_details"] = details
            await response.write(f"data: {json.dumps(usage_chunk)}\n\n".encode())
        if script.hang_before_done:
            with contextlib.suppress(_Hung):
                await self._hang()
            return
        await response.write(b"data: [DONE]\n\n")

    async def _hang(self) -> None:
        hang = asyncio.Event()
        self._hangs.append(hang)
        await hang.wait()
        raise _Hung

    async def _play_tokens(
        self,
        script: Script,
        tokens: list[str],
        played: Played,
        pace: tuple[float, float],
        request: web.Request,
        response: web.StreamResponse,
        emit: Any,
    ) -> None:
        """The text, token by token (raises `_Hung` where the stream ends early)."""
        interval, start = pace
        for n, token in enumerate(tokens):
            if script.cut_after_tokens is not None and n >= script.cut_after_tokens:
                assert request.transport is not None
                request.transport.abort()
                raise _Hung
            if script.hang_after_tokens is not None and n >= script.hang_after_tokens:
                await self._hang()
            if interval:
                await asyncio.sleep(max(0.0, start + n * interval - time.monotonic()))
            if script.raw_after_tokens is not None and n == script.raw_after_tokens[0]:
                await response.write(f"data: {script.raw_after_tokens[1]}\n\n".encode())
            await emit({"content": token})
            produced = len(token) + (played.token_times[-1][1] if played.token_times else 0)
            played.token_times.append((time.monotonic(), produced))
            if n == 0:
                played.first_token_at = time.monotonic()
        if tokens:
            played.last_token_at = time.monotonic()

    @staticmethod
    async def _send_tool_calls(script: Script, send: Any) -> None:
        """First fragment of each call: id + name; then argument pieces, calls interleaved."""
        size = script.argument_fragment_size
        if script.quirky_tool_calls:  # one call after another, every fragment fully labelled
            for call in script.tool_calls:
                for i in range(0, max(1, len(call.arguments)), size):
                    fragment: dict[str, Any] = {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments[i : i + size]},
                    }
                    await send({"tool_calls": [fragment]})
            return
        pieces = [
            [c.arguments[i : i + size] for i in range(0, len(c.arguments), size)]
            for c in script.tool_calls
        ]
        for index, call in enumerate(script.tool_calls):
            await send(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": ""},
                        }
                    ]
                }
            )
        longest = max((len(p) for p in pieces), default=0)
        for step in range(longest):
            for index, call_pieces in enumerate(pieces):
                if step < len(call_pieces):
                    piece = {"index": index, "function": {"arguments": call_pieces[step]}}
                    await send({"tool_calls": [piece]})
