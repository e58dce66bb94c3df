"""A fake Slack Web API: real HTTP on 127.0.0.1, used through the real `slack_sdk` clients.

It keeps channels and messages, records every call (method, arguments, time, HTTP status),
and enforces per-method rate limits the way Slack does: over the limit it answers 429 with
`Retry-After` and `{"ok": false, "error": "ratelimited"}`. It also serves Socket Mode: the URL
returned by `apps.connections.open` is a WebSocket on which tests push envelopes and read acks.

Scopes: the bot token has `scopes` (by default what `manifest.yml` asks for). A method whose
scope the token lacks, on the kind of conversation it is called on, is answered
`missing_scope` with `needed` and `provided`, as Slack does; which scopes Slack takes for each
method is Slack's documentation, transcribed once in `bot/slack/scopes.py` (its `accepts` and
`by_kind`; the fake ignores what the bot says it uses).
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import math
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from aiohttp import WSMsgType, web

from bot.slack.scopes import METHODS, Kind, needed
from tests.fakes.block_elements import ElementError, check_input_element
from tests.fakes.server import ThreadedServer
from tests.fakes.slack_files import SlackFiles
from tests.fakes.slack_limits import Bucket as Bucket
from tests.fakes.slack_limits import Limit as Limit
from tests.fakes.slack_limits import MethodLimits, RateLimits
from tests.fakes.slack_streams import (
    SESSION_STATUSES,
    StreamState,
    apply_tasks,
    join,
    pieces,
)

BOT_TOKEN = "xoxb-test-token"
APP_TOKEN = "xapp-test-token"
TEAM_ID = "T0TEST"
BOT_USER_ID = "UBOT"
BOT_ID = "BBOT"
MAX_TEXT = 4000  # chat.update answers msg_too_long near here in practice
DEFAULT_MEMBERS = ["UALICE", "UBOB", "UCAROL", "UDANA", BOT_USER_ID]
MANIFEST = Path(__file__).parents[2] / "manifest.yml"


def manifest_scopes() -> frozenset[str]:
    """The bot scopes `manifest.yml` asks for: what an installed token has."""
    manifest = yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))
    return frozenset(manifest["oauth_config"]["scopes"]["bot"])


@dataclass(frozen=True)
class Call:
    method: str
    args: dict[str, Any]
    at: float  # time.monotonic() when received
    status: int
    ok: bool
    error: str | None = None  # Slack's `error` of an answer that was not ok


@dataclass
class StoredMessage:
    ts: str
    text: str
    user: str | None
    bot_id: str | None
    thread_ts: str | None
    edits: int = 0
    blocks: list[dict[str, Any]] | None = None
    metadata: dict[str, Any] | None = None
    files: list[dict[str, Any]] | None = None  # Slack's file objects (`slack_files.py`)


class BlockKitError(ValueError):
    pass


def check_blocks(blocks: Any, most: int = 50) -> None:
    """Block Kit's documented limits, as Slack enforces them (`invalid_blocks`): 50 blocks in a
    message, 100 in a modal."""
    if isinstance(blocks, str):
        blocks = json.loads(blocks)
    if not isinstance(blocks, list) or len(blocks) > most:
        raise BlockKitError(f"more than {most} blocks")
    for block in blocks:
        if len(str(block.get("block_id", ""))) > 255:
            raise BlockKitError("block_id too long")
        kind = block.get("type")
        if kind == "section":
            text = block.get("text")
            if text is not None and not 1 <= _js_len(text.get("text", "")) <= 3000:
                raise BlockKitError("section text must be 1 to 3000 characters")
            accessory = block.get("accessory") or {}
            if len(str(accessory.get("value", ""))) > 2000:
                raise BlockKitError("button value over 2000")
            if len((accessory.get("text") or {}).get("text", "")) > 75:
                raise BlockKitError("button text over 75")
            fields = block.get("fields") or []
            if len(fields) > 10 or any(len(f.get("text", "")) > 2000 for f in fields):
                raise BlockKitError("section fields over limits")
        elif kind == "input":
            element = block.get("element") or {}
            if len((block.get("label") or {}).get("text", "")) > 2000:
                raise BlockKitError("input label over 2000")
            try:
                check_input_element(element)
            except ElementError as exc:
                raise BlockKitError(str(exc)) from None
            if int(element.get("max_length") or 3000) > 3000:
                raise BlockKitError("plain_text_input max_length over 3000")
            if _js_len(str(element.get("initial_value") or "")) > 3000:
                raise BlockKitError("plain_text_input initial_value over 3000")
        elif kind == "context":
            if len(block.get("elements") or []) > 10:
                raise BlockKitError("context over 10 elements")
        elif kind == "context_actions":
            elements = block.get("elements") or []
            if not elements or len(elements) > 5:
                raise BlockKitError("context_actions needs 1 to 5 elements")
            for element in elements:
                if element.get("type") not in ("feedback_buttons", "icon_button"):
                    raise BlockKitError("context_actions holds feedback or icon buttons")
                if element.get("type") == "feedback_buttons" and not (
                    element.get("positive_button") and element.get("negative_button")
                ):
                    raise BlockKitError("feedback_buttons needs both buttons")
        elif kind == "actions":
            elements = block.get("elements") or []
            if len(elements) > 25:
                raise BlockKitError("actions over 25 elements")
            for element in elements:
                if len((element.get("text") or {}).get("text", "")) > 75:
                    raise BlockKitError("button text over 75")
                if len(str(element.get("value", ""))) > 2000:
                    raise BlockKitError("button value over 2000")
                if len(str(element.get("action_id", ""))) > 255:
                    raise BlockKitError("action_id over 255")
                confirm = element.get("confirm")
                if confirm and (
                    len(confirm["title"]["text"]) > 100 or len(confirm["text"]["text"]) > 300
                ):
                    raise BlockKitError("confirm dialog over limits")


def _js_len(text: str) -> int:
    """Length as Slack counts it (UTF-16 code units)."""
    return len(text) + sum(1 for c in text if ord(c) > 0xFFFF)


def check_view(view: Any) -> None:
    """A modal: at most 100 blocks, title 24 characters, each block within its limits."""
    if not isinstance(view, dict) or view.get("type") not in ("modal", "home"):
        raise BlockKitError("not a view")
    if view.get("type") == "modal" and len((view.get("title") or {}).get("text", "")) > 24:
        raise BlockKitError("modal title over 24")
    if len(str(view.get("private_metadata") or "")) > 3000:
        raise BlockKitError("private_metadata over 3000")
    check_blocks(view.get("blocks") or [], most=100)


def parse_blocks(blocks: Any) -> list[dict[str, Any]] | dict[str, Any]:
    """The blocks of a call, or Slack's `invalid_blocks` answer."""
    try:
        check_blocks(blocks)
    except BlockKitError as exc:
        return {"ok": False, "error": "invalid_blocks", "detail": str(exc)}
    parsed: list[dict[str, Any]] = json.loads(blocks) if isinstance(blocks, str) else blocks
    return parsed


TIER_1, TIER_2, TIER_3, TIER_4 = (Limit(n, 60.0) for n in (1, 20, 50, 100))


def documented_floors() -> dict[str, MethodLimits]:
    """Slack's documented per-workspace floors for every method the bot calls (docs.slack.dev,
    "Rate limits" and each method's page), which the fake enforces unless a test says
    otherwise: the fake models Slack, not the bot's own assumption about Slack (a fake that
    enforced the bot's budget could never reveal a wrong budget). Tier 2 is "20+" a minute,
    Tier 3 "50+", Tier 4 "100+": the floor is enforced. `chat.postMessage` is "1 per second
    [per channel], short bursts >1 allowed" (here: a bucket of 3, one back a second) and
    "several hundred" a minute per workspace (here: 300). Methods whose limit Slack calls
    "Special" without a number (`chat.getPermalink`, `auth.test`) and `apps.connections.open`
    (Socket Mode's connection, not the bot's Web API client) are not limited here."""
    return {
        "chat.update": TIER_3,
        "chat.appendStream": TIER_4,
        "chat.startStream": TIER_2,
        "chat.stopStream": TIER_2,
        "agents.sessions.setStatus": TIER_3,
        "assistant.threads.setStatus": TIER_3,
        "assistant.threads.setTitle": TIER_3,
        "assistant.threads.setSuggestedPrompts": TIER_3,
        "chat.postMessage": (Bucket(3, 1.0, per_channel=True), Limit(300, 60.0)),
        "chat.postEphemeral": TIER_4,
        "chat.scheduleMessage": TIER_3,
        "chat.scheduledMessages.list": TIER_3,
        "views.open": TIER_4,
        "views.push": TIER_4,
        "views.publish": TIER_4,
        "users.info": TIER_4,
        "users.lookupByEmail": TIER_3,
        "usergroups.users.list": TIER_2,
        "conversations.replies": TIER_3,
        "conversations.history": TIER_3,
        "conversations.info": TIER_3,
        "conversations.members": TIER_4,
        "conversations.open": TIER_3,
        "conversations.setTopic": TIER_2,
    }


@dataclass
class FakeSlack:
    # method -> its limit (or limits: per channel and per workspace)
    limits: dict[str, MethodLimits] = field(default_factory=documented_floors)
    # Messages a conversations.replies / .history page holds at most (15 for a Tier 1 app).
    read_page_most: int = 999
    calls: list[Call] = field(default_factory=list)
    channels: dict[str, list[StoredMessage]] = field(default_factory=lambda: defaultdict(list))
    # every text a message showed, in order: ts -> [posted text, edit 1, edit 2, ...]
    history: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    # the same with the time each text became visible (time.monotonic())
    timeline: dict[str, list[tuple[float, str]]] = field(default_factory=lambda: defaultdict(list))
    fail_methods: dict[str, str] = field(default_factory=dict)
    # method -> the Retry-After header its 429s carry instead of the seconds until a slot frees
    # (a misbehaving proxy or a Slack bug: "inf", "3600", "soon")
    retry_after: dict[str, str] = field(default_factory=dict)
    ephemerals: list[dict[str, Any]] = field(default_factory=list)
    responses: list[dict[str, Any]] = field(default_factory=list)
    published: list[dict[str, Any]] = field(default_factory=list)
    views: list[dict[str, Any]] = field(default_factory=list)
    scheduled: list[dict[str, Any]] = field(default_factory=list)
    channel_info: dict[str, dict[str, Any]] = field(default_factory=dict)
    user_groups: dict[str, list[str]] = field(default_factory=dict)
    delays: dict[str, float] = field(default_factory=dict)  # method -> seconds before answering
    # (method, an argument's value) -> seconds: slow for one user or channel, not for all
    delays_for: dict[tuple[str, str], float] = field(default_factory=dict)
    # channel -> member ids; a channel not listed has DEFAULT_MEMBERS
    members: dict[str, list[str]] = field(default_factory=dict)
    # method -> how many of its next calls answer HTTP 500 (a Slack outage, for fault tests)
    server_errors: dict[str, int] = field(default_factory=dict)
    # method -> how many of its next calls have their connection reset, unanswered
    resets: dict[str, int] = field(default_factory=dict)
    refuse_cards: int = 0  # how many of the next posts with blocks answer internal_error
    # users Slack will not open a DM with (deactivated: conversations.open says user_disabled)
    disabled_users: set[str] = field(default_factory=set)
    # users Slack does not know (removed from the workspace: conversations.open says
    # user_not_found, as its documentation lists)
    unknown_users: set[str] = field(default_factory=set)
    # archived channels: chat.postMessage there says is_archived
    archived: set[str] = field(default_factory=set)
    # method -> how many of its next calls are carried out, then their answer is lost (the
    # connection drops before Slack's answer reaches the caller)
    lose_answers: dict[str, int] = field(default_factory=dict)
    # native streaming (see slack_streams.py): ts -> its stream; how long a stream lives
    streams: dict[str, StreamState] = field(default_factory=dict)
    stream_lifetime: float = 300.0
    agent_sessions: bool = True  # False: the workspace has no agent sessions
    session_statuses: list[dict[str, Any]] = field(default_factory=list)
    assistant_statuses: list[dict[str, Any]] = field(default_factory=list)
    suggested_prompts: list[dict[str, Any]] = field(default_factory=list)
    titles: list[dict[str, Any]] = field(default_factory=list)
    # user id -> fields users.info answers instead of a full member's (e.g. a guest:
    # {"is_restricted": True}; a Slack Connect user: {"team_id": "T0OTHER"})
    users: dict[str, dict[str, Any]] = field(default_factory=dict)
    # the bot token's scopes (Slack answers `missing_scope` to a method they do not cover,
    # per kind of conversation, and names them in every answer's `x-oauth-scopes` header);
    # by default what manifest.yml asks for, a test may give fewer
    scopes: frozenset[str] = field(default_factory=manifest_scopes)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._ts = itertools.count(1)
        self._last_ts = 0.0
        self._counted = RateLimits()
        self.files = SlackFiles(self)
        self._server = ThreadedServer(self._build())
        self._sockets: list[web.WebSocketResponse] = []
        self.socket_acks: list[dict[str, Any]] = []
        self.socket_connected = threading.Event()

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> FakeSlack:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    @property
    def api_url(self) -> str:
        return f"{self._server.url}/api/"

    # -- what tests read ---------------------------------------------------------------------
    def calls_to(self, method: str) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.method == method]

    def thread(self, channel: str, thread_ts: str | None = None) -> list[StoredMessage]:
        with self._lock:
            messages = list(self.channels[channel])
        if thread_ts is None:
            return messages
        return [m for m in messages if m.thread_ts == thread_ts or m.ts == thread_ts]

    def bot_messages(self, channel: str) -> list[StoredMessage]:
        return [m for m in self.thread(channel) if m.bot_id == BOT_ID]

    def as_tier_one_app(self) -> None:
        """Reads as Slack gives them to a commercially distributed non-Marketplace app created
        after 2025-05-29: conversations.replies and .history once a minute, 15 messages a
        page."""
        self.limits["conversations.replies"] = TIER_1
        self.limits["conversations.history"] = TIER_1
        self.read_page_most = 15

    def add_user_message(
        self, channel: str, text: str, user: str = "UALICE", thread_ts: str | None = None
    ) -> str:
        """A message a person wrote (as Slack would store it); returns its ts."""
        with self._lock:
            ts = self._next_ts()
            self.channels[channel].append(StoredMessage(ts, text, user, None, thread_ts))
        return ts

    # -- internals ---------------------------------------------------------------------------
    def _next_ts(self) -> str:
        """Like Slack's: the time the message was stored, unique and increasing."""
        next(self._ts)
        self._last_ts = max(time.time(), self._last_ts + 0.000001)
        return f"{self._last_ts:.6f}"

    def _find(self, channel: str, ts: str) -> StoredMessage | None:
        return next((m for m in self.channels[channel] if m.ts == ts), None)

    def _rate_limited(self, method: str, args: dict[str, Any], now: float) -> float | None:
        """Seconds until the call would be allowed, or None (then it is counted). A call
        refused by one of its limits is not counted by any."""
        return self._counted.check(method, self.limits.get(method), args, now)

    def _build(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/api/{method}", self._handle)
        app.router.add_get("/socket", self._socket)
        app.router.add_post("/response/{id}", self._response_url)
        self.files.routes(app)
        return app

    async def _read_args(self, request: web.Request) -> dict[str, Any]:
        args: dict[str, Any] = dict(request.query)
        if request.method == "GET":
            pass
        elif request.content_type == "application/json":
            args.update(await request.json())
        else:
            form = await request.post()
            args.update({k: str(v) for k, v in form.items()})
        return args

    async def _handle(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        args = await self._read_args(request)
        delay = self.delays.get(method, 0.0) + sum(
            seconds
            for (slow, value), seconds in self.delays_for.items()
            if slow == method and value in args.values()
        )
        if delay:
            await asyncio.sleep(delay)
            if request.transport is None or request.transport.is_closing():
                # The caller died while waiting: like Slack, act only on requests it received
                # whole from a live client.
                return web.Response(status=499)
        now = time.monotonic()
        auth = request.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ") or str(args.get("token", ""))
        with self._lock:
            if self.resets.get(method, 0) > 0:
                self.resets[method] -= 1
                self.calls.append(Call(method, args, now, 0, False))
                assert request.transport is not None
                request.transport.abort()
                return web.Response(status=499)
            if self.server_errors.get(method, 0) > 0:
                self.server_errors[method] -= 1
                self.calls.append(Call(method, args, now, 500, False))
                return web.Response(status=500, text="internal error")
            wait = self._rate_limited(method, args, now)
            if wait is not None:
                self.calls.append(Call(method, args, now, 429, False))
                return web.json_response(
                    {"ok": False, "error": "ratelimited"},
                    status=429,
                    headers={
                        "Retry-After": self.retry_after.get(method, str(max(1, math.ceil(wait))))
                    },
                )
            expected = APP_TOKEN if method == "apps.connections.open" else BOT_TOKEN
            lacking = needed(method, self._kind_of_call(method, args), self.scopes)
            headers = self._scope_headers(method, args) if token == BOT_TOKEN else {}
            if token != expected:
                body: dict[str, Any] = {"ok": False, "error": "invalid_auth"}
            elif lacking is not None:
                body = {
                    "ok": False,
                    "error": "missing_scope",
                    "needed": lacking,
                    "provided": ",".join(sorted(self.scopes)),
                }
            elif method in self.fail_methods:
                body = {"ok": False, "error": self.fail_methods[method]}
            else:
                body = self._dispatch(method, args, request)
            self.calls.append(Call(method, args, now, 200, bool(body.get("ok")), body.get("error")))
            if self.lose_answers.get(method, 0) > 0:
                self.lose_answers[method] -= 1
                assert request.transport is not None
                request.transport.abort()  # done, but the answer never arrives
                return web.Response(status=499)
        return web.json_response(body, headers=headers)

    # -- scopes ------------------------------------------------------------------------------
    def kind_of(self, channel: str) -> Kind:
        """The kind of conversation Slack would see: what `channel_info` says, else its id's
        first letter (D: a DM, G: a private channel, C: a public one)."""
        info = self.channel_info.get(channel) or {}
        if info.get("is_mpim"):
            return Kind.GROUP_DM
        if info.get("is_im") or channel.startswith("D"):
            return Kind.DM
        if info.get("is_private") or (channel.startswith("G") and "is_private" not in info):
            return Kind.PRIVATE
        return Kind.PUBLIC

    def _kind_of_call(self, method: str, args: dict[str, Any]) -> Kind | None:
        channel = str(args.get("channel") or args.get("channel_id") or "")
        if method == "conversations.open" and not channel:
            users = [u for u in str(args.get("users") or "").split(",") if u]
            return None if not users else Kind.DM if len(users) == 1 else Kind.GROUP_DM
        return self.kind_of(channel) if channel else None

    def _scope_headers(self, method: str, args: dict[str, Any]) -> dict[str, str]:
        """Slack's: the token's scopes, and the scopes this call would take."""
        entry = METHODS.get(method)
        accepted = entry.accepted(self._kind_of_call(method, args)) if entry else frozenset()
        return {
            "X-OAuth-Scopes": ",".join(sorted(self.scopes)),
            "X-Accepted-OAuth-Scopes": ",".join(sorted(accepted)),
        }

    def _dispatch(self, method: str, args: dict[str, Any], request: web.Request) -> dict[str, Any]:
        handler = {
            "auth.test": self._auth_test,
            "chat.postMessage": self._post_message,
            "chat.update": self._update,
            "conversations.replies": self._replies,
            "conversations.history": self._history,
            "conversations.info": self._info,
            "conversations.members": self._members,
            "conversations.setTopic": self._set_topic,
            "conversations.open": self._open_dm,
            "apps.connections.open": self._connections_open,
            "users.info": self._users_info,
            "users.lookupByEmail": self._lookup_by_email,
            "usergroups.users.list": self._group_users,
            "chat.postEphemeral": self._post_ephemeral,
            "chat.getPermalink": self._permalink,
            "chat.scheduleMessage": self._schedule,
            "chat.scheduledMessages.list": self._scheduled_list,
            "views.open": self._views_open,
            "views.push": self._views_open,
            "views.publish": self._views_publish,
            "chat.startStream": self._start_stream,
            "chat.appendStream": self._append_stream,
            "chat.stopStream": self._stop_stream,
            "agents.sessions.setStatus": self._session_status,
            "assistant.threads.setStatus": self._assistant_status,
            "assistant.threads.setSuggestedPrompts": self._suggested,
            "assistant.threads.setTitle": self._title,
        }.get(method)
        if handler is None:
            return {"ok": False, "error": "unknown_method"}
        return handler(args, request)

    def _auth_test(self, _args: dict[str, Any], _request: web.Request) -> dict[str, Any]:
        return {
            "ok": True,
            "url": "https://test.slack.com/",
            "team": "Test Team",
            "user": "countersign",
            "team_id": TEAM_ID,
            "user_id": BOT_USER_ID,
            "bot_id": BOT_ID,
        }

    def _post_message(self, args: dict[str, Any], _request: web.Request) -> dict[str, Any]:
        text = str(args.get("text") or "")
        channel = str(args.get("channel") or "")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        if channel in self.archived:
            return {"ok": False, "error": "is_archived"}
        if len(text) > MAX_TEXT:
            return {"ok": False, "error": "msg_too_long"}
        blocks = args.get("blocks")
        if blocks is not None:
            if self.refuse_cards > 0:
                self.refuse_cards -= 1
                return {"ok": False, "error": "internal_error"}
            blocks = parse_blocks(blocks)
            if isinstance(blocks, dict):
                return blocks
        ts = self._next_ts()
        thread_ts = args.get("thread_ts") or None
        metadata = args.get("metadata")
        metadata = json.loads(metadata) if isinstance(metadata, str) else metadata
        self.channels[channel].append(
            StoredMessage(
                ts, text, BOT_USER_ID, BOT_ID, thread_ts, blocks=blocks, metadata=metadata
            )
        )
        self.history[ts].append(text)
        self.timeline[ts].append((time.monotonic(), text))
        return {"ok": True, "channel": channel, "ts": ts, "message": {"text": text, "ts": ts}}

    def _update(self, args: dict[str, Any], _request: web.Request) -> dict[str, Any]:
        channel, ts = str(args.get("channel")), str(args.get("ts"))
        text = str(args.get("text") or "")
        message = self._find(channel, ts)
        if message is None:
            return {"ok": False, "error": "message_not_found"}
        if self._streaming(ts):
            return {"ok": False, "error": "streaming_state_conflict"}
        if channel in self.archived:
            return {"ok": False, "error": "is_archived"}
        if len(text) > MAX_TEXT:
            return {"ok": False, "error": "msg_too_long"}
        blocks = args.get("blocks")
        if blocks is not None:
            parsed = parse_blocks(blocks)
            if isinstance(parsed, dict):
                return parsed
            message.blocks = parsed
        message.text = text
        message.edits += 1
        self.history[ts].append(text)
        self.timeline[ts].append((time.monotonic(), text))
        return {"ok": True, "channel": channel, "ts": ts, "text": text}

    # -- native streaming ---------------------------------------------------------------------
    def _streaming(self, ts: str) -> bool:
        """Open and not yet past its lifetime (a stream Slack ended is closed for good)."""
        state = self.streams.get(ts)
        if state is None or not state.open:
            return False
        if time.monotonic() - state.started_at > self.stream_lifetime:
            state.open = False
        return state.open

    def _start_stream(self, args: dict[str, Any], _request: web.Request) -> dict[str, Any]:
        channel, thread_ts = str(args.get("channel") or ""), str(args.get("thread_ts") or "")
        if not channel or not thread_ts:
            return {"ok": False, "error": "invalid_arguments"}
        for name in ("recipient_user_id", "recipient_team_id"):
            if not args.get(name):
                return {"ok": False, "error": f"missing_{name}"}
        if not any(m.ts == thread_ts for m in self.channels[channel]):
            return {"ok": False, "error": "thread_not_found"}
        parsed = pieces(args)
        if isinstance(parsed, str):
            return {"ok": False, "error": parsed}
        text, chunks = parsed
        ts = self._next_ts()
        state = StreamState(
            time.monotonic(),
            recipient=(str(args["recipient_user_id"]), str(args["recipient_team_id"])),
        )
        apply_tasks(state, chunks)
        self.streams[ts] = state
        self.channels[channel].append(StoredMessage(ts, text, BOT_USER_ID, BOT_ID, thread_ts))
        self.history[ts].append(text)
        self.timeline[ts].append((time.monotonic(), text))
        return {"ok": True, "channel": channel, "ts": ts}

    def _stream_call(
        self, args: dict[str, Any]
    ) -> tuple[StoredMessage, StreamState, str, list[dict[str, Any]]] | dict[str, Any]:
        channel, ts = str(args.get("channel") or ""), str(args.get("ts") or "")
        message = self._find(channel, ts)
        if message is None:
            return {"ok": False, "error": "message_not_found"}
        if not self._streaming(ts):
            return {"ok": False, "error": "message_not_in_streaming_state"}
        parsed = pieces(args)
        if isinstance(parsed, str):
            return {"ok": False, "error": parsed}
        return message, self.streams[ts], parsed[0], parsed[1]

    def _show(self, message: StoredMessage, state: StreamState, text: str, chunks: Any) -> None:
        apply_tasks(state, chunks)
        state.appends += 1
        if text:
            message.text = join(message.text, text)
            self.history[message.ts].append(message.text)
            self.timeline[message.ts].append((time.monotonic(), message.text))

    def _append_stream(self, args: dict[str, Any], _request: web.Request) -> dict[str, Any]:
        found = self._stream_call(args)
        if isinstance(found, dict):
            return found
        message, state, text, chunks = found
        if not text and not chunks:
            return {"ok": False, "error": "no_text"}
        self._show(message, state, text, chunks)
        return {"ok": True, "channel": args["channel"], "ts": message.ts}

    def _stop_stream(self, args: dict[str, Any], _request: web.Request) -> dict[str, Any]:
        found = self._stream_call(args)
        if isinstance(found, dict):
            return found
        message, state, text, chunks = found
        blocks = args.get("blocks")
        if blocks is not None:
            parsed = parse_blocks(blocks)
            if isinstance(parsed, dict):
                return parsed
            message.blocks = parsed
        self._show(message, state, text, chunks)
        state.open = False
        return {"ok": True, "channel": args["channel"], "ts": message.ts}

    def end_stream(self, ts: str) -> None:
        """Slack ends the stream now (as it does after about five minutes)."""
        with self._lock:
            self.streams[ts].open = False

    def press_stop(self, channel: str, thread_ts: str, user: str) -> dict[str, Any]:
        """A person presses Stop on the thread's agent session: Slack ends the app's open
        streams in the thread and sends `agent_session_stopped` naming them."""
        with self._lock:
            stopped = [
                m.ts
                for m in self.channels[channel]
                if m.thread_ts == thread_ts and m.ts in self.streams and self._streaming(m.ts)
            ]
            for ts in stopped:
                self.streams[ts].open = False
            event_ts = self._next_ts()
        return {
            "type": "agent_session_stopped",
            "channel": channel,
            "thread_ts": thread_ts,
            "user": user,
            "streaming_message_ts": stopped,
            "event_ts": event_ts,
        }

    def streamed_messages(self, channel: str) -> list[StoredMessage]:
        return [m for m in self.bot_messages(channel) if m.ts in self.streams]

    # -- agent sessions and assistant threads ---------------------------------------------------
    def _session_status(self, args: dict[str, Any], _request: web.Request) -> dict[str, Any]:
        if not self.agent_sessions:
            return {"ok": False, "error": "feature_not_enabled"}
        if args.get("status") not in SESSION_STATUSES:
            return {"ok": False, "error": "invalid_status"}
        if not args.get("channel_id"):
            return {"ok": False, "error": "invalid_arguments"}
        self.session_statuses.append(dict(args))
        return {"ok": True}

    def _assistant_status(self, args: dict[str, Any], _request: web.Request) -> dict[str, Any]:
        if not args.get("channel_id") or not args.get("thread_ts"):
            return {"ok": False, "error": "invalid_arguments"}
        self.assistant_statuses.append(dict(args))
        return {"ok": True}

    def _suggested(self, args: dict[str, Any], _request: web.Request) -> dict[str, Any]:
        prompts = args.get("prompts")
        if not args.get("channel_id") or not isinstance(prompts, list) or not prompts:
            return {"ok": False, "error": "invalid_arguments"}
        if len(prompts) > 4 or any(not p.get("title") or not p.get("message") for p in prompts):
            return {"ok": False, "error": "invalid_arguments"}
        self.suggested_prompts.append(dict(args))
        return {"ok": True}

    def _title(self, args: dict[str, Any], _request: web.Request) -> dict[str, Any]:
        if not args.get("channel_id") or not args.get("thread_ts") or not args.get("title"):
            return {"ok": False, "error": "invalid_arguments"}
        self.titles.append(dict(args))
        return {"ok": True}

    @staticmethod
    def _shown(m: StoredMessage, with_metadata: bool) -> dict[str, Any]:
        return {
            "type": "message",
            "ts": m.ts,
            "text": m.text,
            **({"user": m.user} if m.user else {}),
            **({"bot_id": m.bot_id} if m.bot_id else {}),
            **({"thread_ts": m.thread_ts} if m.thread_ts else {}),
            **({"metadata": m.metadata} if with_metadata and m.metadata else {}),
            **({"files": m.files} if m.files else {}),
        }

    @staticmethod
    def _page(
        found: list[StoredMessage], args: dict[str, Any], newest_first: bool, most: int = 999
    ) -> tuple[list[StoredMessage], str]:
        """Slack's paging: `oldest`/`latest` bound the time range (exclusive unless
        `inclusive`), `limit` (default 100, at most `most`: 999, or 15 for a Tier 1 app) sizes
        a page, and the answer's `next_cursor` (opaque) continues after the page's last
        message."""
        inclusive = str(args.get("inclusive")).lower() in ("1", "true")
        oldest, latest = float(args.get("oldest") or 0), float(args.get("latest") or 1e12)

        def inside(ts: float) -> bool:
            if inclusive:
                return oldest <= ts <= latest
            return oldest < ts < latest

        found = sorted(
            (m for m in found if inside(float(m.ts))),
            key=lambda m: float(m.ts),
            reverse=newest_first,
        )
        cursor = str(args.get("cursor") or "")
        if cursor:
            after = float(base64.b64decode(cursor).decode().removeprefix("next_ts:"))
            found = [
                m for m in found if (float(m.ts) < after if newest_first else float(m.ts) > after)
            ]
        limit = min(int(args.get("limit") or 100), most)
        page, rest = found[:limit], found[limit:]
        more = base64.b64encode(f"next_ts:{page[-1].ts}".encode()).decode() if rest else ""
        return page, more

    def _replies(self, args: dict[str, Any], _request: web.Request) -> dict[str, Any]:
        channel, ts = str(args.get("channel")), str(args.get("ts"))
        with_metadata = str(args.get("include_all_metadata")).lower() in ("1", "true")
        parent = self._find(channel, ts)
        if parent is None:
            return {"ok": False, "error": "thread_not_found"}
        replies = [m for m in self.channels[channel] if m.thread_ts == ts and m.ts != ts]
        first = not args.get("cursor")
        most = self.read_page_most - (1 if first else 0)  # the parent counts in the first page
        page, more = self._page(replies, args, newest_first=False, most=most)
        if first:
            page = [parent, *page]  # the first page starts with the thread's parent
        return {
            "ok": True,
            "messages": [self._shown(m, with_metadata) for m in page],
            "has_more": bool(more),
            "response_metadata": {"next_cursor": more},
        }

    def _history(self, args: dict[str, Any], _request: web.Request) -> dict[str, Any]:
        channel = str(args.get("channel"))
        top = [m for m in self.channels[channel] if m.thread_ts is None or m.thread_ts == m.ts]
        with_metadata = str(args.get("include_all_metadata")).lower() in ("1", "true")
        page, more = self._page(top, args, newest_first=True, most=self.read_page_most)
        return {
            "ok": True,
            "messages": [
                {"type": "message", "ts": m.ts, "text": m.text, "user": m.user}
                | ({"metadata": m.metadata} if with_metadata and m.metadata else {})
                | ({"files": m.files} if m.files else {})
                for m in page
            ],
            "has_more": bool(more),
            "response_metadata": {"next_cursor": more},
        }

    def _members(self, args: dict[str, Any], _request: web.Request) -> dict[str, Any]:
        members = self.members.get(str(args.get("channel")), DEFAULT_MEMBERS)
        return {"ok": True, "members": members, "response_metadata": {"next_cursor": ""}}

    def _channel(self, channel: str) -> dict[str, Any]:
        return self.channel_info.setdefault(
            channel,
            {
                "id": channel,
                "name": f"chan-{channel.lower()}",
                "topic": {"value": ""},
                "purpose": {"value": ""},
                "num_members": 3,
                "is_private": False,
            },
        )

    def _open_dm(self, args: dict[str, Any], _request: web.Request) -> dict[str, Any]:
        """The bot's DM with one person (`users` names one user): its id, the same every time."""
        users = str(args.get("users", ""))
        if not users or "," in users:
            return {"ok": False, "error": "users_list_not_supplied" if not users else "not_found"}
        if users in self.disabled_users:
            return {"ok": False, "error": "user_disabled"}
        if users in self.unknown_users:
            return {"ok": False, "error": "user_not_found"}
        dm = "D" + users.lstrip("UW")
        self.members.setdefault(dm, [users, BOT_USER_ID])
        self.channel_info.setdefault(dm, {"id": dm, "is_im": True, "user": users})
        return {"ok": True, "channel": {"id": dm}}

    def _info(self, args: dict[str, Any], _request: web.Request) -> dict[str, Any]:
        return {"ok": True, "channel": self._channel(str(args.get("channel")))}

    def _set_topic(self, args: dict[str, Any], _request: web.Request) -> dict[str, Any]:
        channel = self._channel(str(args.get("channel")))
        channel["topic"] = {"value": str(args.get("topic", ""))}
        return {"ok": True, "channel": channel}

    def _user(self, user_id: str) -> dict[str, Any]:
        name = user_id.lower()
        return {
            "id": user_id,
            "name": name,
            "real_name": name.title(),
            "team_id": TEAM_ID,
            "tz": "Europe/Berlin",
            "is_bot": False,
            "is_restricted": False,
            "is_ultra_restricted": False,
            "profile": {"display_name": name, "title": ""},
        } | self.users.get(user_id, {})

    def _users_info(self, args: dict[str, Any], _request: web.Request) -> dict[str, Any]:
        return {"ok": True, "user": self._user(str(args.get("user")))}

    def _lookup_by_email(self, args: dict[str, Any], _request: web.Request) -> dict[str, Any]:
        local = str(args.get("email", "")).split("@")[0].upper()
        return {"ok": True, "user": self._user(f"U{local}")}

    def _group_users(self, args: dict[str, Any], _request: web.Request) -> dict[str, Any]:
        group = str(args.get("usergroup"))
        if group not in self.user_groups:
            return {"ok": False, "error": "no_such_subteam"}
        return {"ok": True, "users": self.user_groups[group]}

    def _post_ephemeral(self, args: dict[str, Any], _request: web.Request) -> dict[str, Any]:
        self.ephemerals.append(dict(args))
        return {"ok": True, "message_ts": self._next_ts()}

    def _permalink(self, args: dict[str, Any], _request: web.Request) -> dict[str, Any]:
        """As Slack links a reply: with its thread (`thread_ts`, `cid`), so it opens there."""
        channel, ts = str(args.get("channel")), str(args.get("message_ts"))
        found = next((m for m in self.channels.get(channel, []) if m.ts == ts), None)
        link = f"https://test.slack.com/archives/{channel}/p{ts.replace('.', '')}"
        if found is not None and found.thread_ts and found.thread_ts != ts:
            link += f"?thread_ts={found.thread_ts}&cid={channel}"
        return {"ok": True, "channel": channel, "permalink": link}

    def _schedule(self, args: dict[str, Any], _request: web.Request) -> dict[str, Any]:
        self.scheduled.append(dict(args))
        return {"ok": True, "scheduled_message_id": f"Q{len(self.scheduled)}"}

    def _scheduled_list(self, args: dict[str, Any], _request: web.Request) -> dict[str, Any]:
        """Messages still waiting to be posted (Slack lists no metadata), a page at a time."""
        channel = args.get("channel")
        waiting = [
            {
                "id": f"Q{n}",
                "channel_id": m.get("channel"),
                "post_at": int(m.get("post_at") or 0),
                "date_created": int(time.time()),
                "text": m.get("text", ""),
            }
            for n, m in enumerate(self.scheduled, 1)
            if not channel or m.get("channel") == channel
        ]
        start = int(base64.b64decode(str(args["cursor"])).decode()) if args.get("cursor") else 0
        limit = min(int(args.get("limit") or 100), 100)
        end = start + limit
        more = base64.b64encode(str(end).encode()).decode() if end < len(waiting) else ""
        return {
            "ok": True,
            "scheduled_messages": waiting[start:end],
            "response_metadata": {"next_cursor": more},
        }

    def _views_open(self, args: dict[str, Any], _request: web.Request) -> dict[str, Any]:
        """views.open and views.push: a modal needs the trigger id of a click (3 s to use it)
        and must be within Block Kit's limits."""
        if not args.get("trigger_id"):
            return {"ok": False, "error": "invalid_trigger_id"}
        view = args.get("view")
        view = json.loads(view) if isinstance(view, str) else view
        try:
            check_view(view)
        except BlockKitError as exc:
            return {"ok": False, "error": "invalid_arguments", "detail": str(exc)}
        self.views.append({"trigger_id": args.get("trigger_id"), "view": view})
        return {"ok": True, "view": {"id": f"V{len(self.views)}", **(view or {})}}

    async def _response_url(self, request: web.Request) -> web.Response:
        """What a slash command's or button's `response_url` received."""
        body = await request.json()
        if body.get("blocks"):
            try:
                check_blocks(body["blocks"])
            except BlockKitError as exc:
                return web.Response(status=400, text=f"invalid_blocks: {exc}")
        with self._lock:
            self.responses.append({"id": request.match_info["id"], **body})
        return web.Response(text="ok")

    def response_url(self, key: str) -> str:
        return f"{self._server.url}/response/{key}"

    def answers(self, key: str) -> list[dict[str, Any]]:
        with self._lock:
            return [r for r in self.responses if r["id"] == key]

    def cards(self, channel: str) -> list[StoredMessage]:
        """Messages of the bot that carry blocks (approval cards), oldest first; answers that
        end with feedback buttons are not cards."""
        return [
            m
            for m in self.bot_messages(channel)
            if m.blocks and not any(b.get("type") == "context_actions" for b in m.blocks)
        ]

    def feedback_buttons(self, ts: str) -> dict[str, Any] | None:
        """The feedback element a message ends with, if any."""
        for message in (m for ms in self.channels.values() for m in ms if m.ts == ts):
            for block in message.blocks or []:
                if block.get("type") == "context_actions":
                    return dict(block["elements"][0])
        return None

    def _views_publish(self, args: dict[str, Any], _request: web.Request) -> dict[str, Any]:
        view = args.get("view")
        view = json.loads(view) if isinstance(view, str) else view
        if len((view or {}).get("blocks", [])) > 100:
            return {"ok": False, "error": "invalid_arguments"}
        self.published.append({"user_id": args.get("user_id"), "view": view})
        return {"ok": True, "view": view}

    def home_of(self, user: str) -> dict[str, Any] | None:
        with self._lock:
            views = [p["view"] for p in self.published if p["user_id"] == user]
        return views[-1] if views else None

    def ephemerals_for(self, user: str) -> list[str]:
        with self._lock:
            return [str(e.get("text")) for e in self.ephemerals if e.get("user") == user]

    def user_posts(self, channel: str) -> list[StoredMessage]:
        """Messages the bot posted in `channel` outside any thread (e.g. via post_message)."""
        return [m for m in self.bot_messages(channel) if m.thread_ts is None]

    def _connections_open(self, _args: dict[str, Any], request: web.Request) -> dict[str, Any]:
        return {"ok": True, "url": f"ws://{request.host}/socket"}

    # -- Socket Mode -------------------------------------------------------------------------
    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.send_json({"type": "hello", "num_connections": 1})
        self._sockets.append(ws)
        self.socket_connected.set()
        async for message in ws:
            if message.type == WSMsgType.TEXT:
                self.socket_acks.append(json.loads(message.data))
        return ws

    def push_socket_event(self, body: Any, envelope_id: str, kind: str = "events_api") -> None:
        """Deliver a payload over Socket Mode, as Slack does (`events_api`, `interactive`)."""
        envelope = {
            "envelope_id": envelope_id,
            "type": kind,
            "accepts_response_payload": False,
            "retry_attempt": 0,
            "retry_reason": "",
            "payload": body,
        }

        async def send() -> None:
            await self._sockets[-1].send_json(envelope)

        self._server.call(send())

    def close_sockets(self) -> None:
        async def close() -> None:
            for ws in self._sockets:
                await ws.close()

        self._server.call(close())


def event_body(event: dict[str, Any], event_id: str, team_id: str = TEAM_ID) -> dict[str, Any]:
    """An Events API envelope (`event_callback`) around `event`."""
    return {
        "token": "legacy-verification-token",
        "team_id": team_id,
        "api_app_id": "A0TEST",
        "event": event,
        "type": "event_callback",
        "event_id": event_id,
        "event_time": int(time.time()),
        "authorizations": [
            {"team_id": team_id, "user_id": BOT_USER_ID, "is_bot": True, "enterprise_id": None}
        ],
    }


async def wait_until(predicate: Any, timeout: float = 10.0, interval: float = 0.01) -> None:
    """Poll `predicate` until it is true; fail the test with a clear message on timeout."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await asyncio.sleep(interval)
