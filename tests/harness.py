"""The bot under test, served in HTTP mode on 127.0.0.1, driven through its front door:
signed Events API requests in, recorded Slack and model calls out."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Coroutine, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import aiohttp

from bot.app import Countersign
from bot.config import Settings
from bot.server import EVENTS_PATH, serve_http
from tests.cli_process import run_forked
from tests.fakes import openai as fake_openai
from tests.fakes import slack as fake_slack
from tests.fakes.view_state import Chosen, view_state

T = TypeVar("T")

SIGNING_SECRET = "test-signing-secret"


def clean_env(**values: str) -> dict[str, str]:
    """This process's environment without any Countersign setting, plus `values`."""
    prefixes = ("SLACK_", "OPENAI_", "LLM_", "DATABASE_", "SYSTEM_PROMPT", "HISTORY_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    env.update(values)
    return env


def run_cli(
    args: list[str], env: dict[str, str], cwd: Path, timeout: float = 120, exec_python: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run `countersign ARGS` to completion in a process of its own: forked from a warm
    interpreter (tests/cli_process.py), or with `exec_python` as `python -m bot ARGS` afresh."""
    if not exec_python:
        return run_forked(args, env, cwd, timeout)
    return subprocess.run(
        [sys.executable, "-m", "bot", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


METRICS_TOKEN = "test-operator-token"
OPERATOR = {"Authorization": f"Bearer {METRICS_TOKEN}"}


def make_settings(
    slack: fake_slack.FakeSlack, model: fake_openai.FakeOpenAI, database_url: str, **extra: Any
) -> Settings:
    values: dict[str, Any] = {
        "slack_bot_token": fake_slack.BOT_TOKEN,
        "slack_app_token": None,
        "slack_signing_secret": SIGNING_SECRET,
        "slack_api_url": slack.api_url,
        "openai_api_key": fake_openai.API_KEY,
        "openai_base_url": model.base_url,
        "llm_model": fake_openai.MODEL,
        "llm_timeout_seconds": 5,
        "llm_max_retries": 2,
        "database_url": database_url,
        "shutdown_grace_seconds": 5,
        "metrics_token": METRICS_TOKEN,
        # Tests of the edit transport describe it; native streaming has its own tests. Modules
        # about approvals, grants, policy and audit pass streaming="auto", the bot's default:
        # with edits each turn also posts a "Thinking…" placeholder, and Slack's one post a
        # second per channel made them wait several seconds a test.
        "streaming": "edit",
        # Titles from the first words: a model title is a non-streamed call the fake would
        # count as a summary; tests of model titles turn it on.
        "title_model": "off",
    }
    values.update(extra)
    return Settings(_env_file=None, **values)


@dataclass
class SlackFront:
    """Slack's side of a bot's HTTP front door: signed events, clicks, commands, modals."""

    url: str
    session: aiohttp.ClientSession
    signing_secret: str = SIGNING_SECRET
    _event_ids: int = field(default=0)

    def next_event_id(self) -> str:
        """Unique across instances, as Slack's are (two bots share one fake Slack)."""
        self._event_ids += 1
        return f"Ev{self._event_ids:06d}{uuid.uuid4().hex[:10]}"

    async def post_raw(self, body: bytes, headers: dict[str, str]) -> tuple[int, str]:
        async with self.session.post(self.url + EVENTS_PATH, data=body, headers=headers) as r:
            return r.status, await r.text()

    def signed_headers(self, body: bytes, timestamp: int | None = None) -> dict[str, str]:
        """Slack's v0 signature over the raw bytes (a body need not be valid text)."""
        ts = str(timestamp if timestamp is not None else int(time.time()))
        digest = hmac.new(
            self.signing_secret.encode(), b"v0:" + ts.encode() + b":" + body, hashlib.sha256
        ).hexdigest()
        return {
            "Content-Type": "application/json",
            "X-Slack-Request-Timestamp": ts,
            "X-Slack-Signature": f"v0={digest}",
        }

    async def send_event(
        self,
        event: dict[str, Any],
        event_id: str | None = None,
        retry_num: int | None = None,
    ) -> int:
        body = json.dumps(fake_slack.event_body(event, event_id or self.next_event_id())).encode()
        headers = self.signed_headers(body)
        if retry_num is not None:
            headers["X-Slack-Retry-Num"] = str(retry_num)
            headers["X-Slack-Retry-Reason"] = "http_timeout"
        status, _ = await self.post_raw(body, headers)
        return status

    async def mention(
        self,
        channel: str,
        text: str,
        slack: fake_slack.FakeSlack,
        user: str = "UALICE",
        thread_ts: str | None = None,
    ) -> str:
        """A person mentions the bot: the message is stored in the fake, then delivered."""
        full = f"<@{fake_slack.BOT_USER_ID}> {text}"
        ts = slack.add_user_message(channel, full, user=user, thread_ts=thread_ts)
        event: dict[str, Any] = {
            "type": "app_mention",
            "user": user,
            "text": full,
            "ts": ts,
            "channel": channel,
            "event_ts": ts,
        }
        if thread_ts:
            event["thread_ts"] = thread_ts
        assert await self.send_event(event) == 200
        return ts

    async def say(
        self,
        slack: fake_slack.FakeSlack,
        channel: str,
        text: str,
        user: str = "UALICE",
        thread_ts: str | None = None,
        **extra: str,
    ) -> str:
        """A person writes a plain message (no mention): stored in the fake, then delivered
        as a `message` event; a channel starting with D is a DM."""
        ts = slack.add_user_message(channel, text, user=user, thread_ts=thread_ts)
        event: dict[str, Any] = {
            "type": "message",
            "channel_type": "im" if channel.startswith("D") else "channel",
            "channel": channel,
            "user": user,
            "text": text,
            "ts": ts,
            **extra,
        }
        if thread_ts:
            event["thread_ts"] = thread_ts
        assert await self.send_event(event) == 200
        return ts

    async def _interact(self, payload: dict[str, Any]) -> tuple[int, str]:
        import urllib.parse

        payload = {
            "api_app_id": "A0TEST",
            "token": "legacy",
            "team": {"id": fake_slack.TEAM_ID},
            **payload,
        }
        body = urllib.parse.urlencode({"payload": json.dumps(payload)}).encode()
        headers = self.signed_headers(body)
        headers["Content-Type"] = "application/x-www-form-urlencoded"
        return await self.post_raw(body, headers)

    async def click(
        self, card: fake_slack.StoredMessage, action_id: str, user: str, channel: str
    ) -> int:
        """A person clicks a button of a card (found by its action id)."""
        button = next(
            e
            for b in card.blocks or []
            if b.get("type") == "actions"
            for e in b.get("elements", [])
            if e.get("action_id") == action_id
        )
        status, _ = await self._interact(
            {
                "type": "block_actions",
                "user": {"id": user, "team_id": fake_slack.TEAM_ID},
                "trigger_id": f"trigger-{user}-{time.monotonic_ns()}",
                "container": {"type": "message", "message_ts": card.ts, "channel_id": channel},
                "channel": {"id": channel},
                "message": {"ts": card.ts, "thread_ts": card.thread_ts, "text": card.text},
                "response_url": "http://127.0.0.1:9/response",
                "actions": [
                    {
                        "type": "button",
                        "action_id": action_id,
                        "block_id": "b",
                        "value": button["value"],
                        "action_ts": "1.0",
                    }
                ],
            }
        )
        return status

    async def command(
        self, slack: fake_slack.FakeSlack, command: str, text: str, user: str
    ) -> tuple[int, float, str]:
        """A person runs a slash command; returns (status, seconds to acknowledge, key of the
        response_url whose answers `slack.answers(key)` lists)."""
        import urllib.parse

        key = f"{command.strip('/')}-{user}-{time.monotonic_ns()}"
        body = urllib.parse.urlencode(
            {
                "token": "legacy",
                "team_id": fake_slack.TEAM_ID,
                "team_domain": "test",
                "channel_id": "C1",
                "channel_name": "general",
                "user_id": user,
                "user_name": user.lower(),
                "command": command,
                "text": text,
                "api_app_id": "A0TEST",
                "response_url": slack.response_url(key),
                "trigger_id": f"trigger-{key}",
            }
        ).encode()
        headers = self.signed_headers(body)
        headers["Content-Type"] = "application/x-www-form-urlencoded"
        started = time.monotonic()
        status, _ = await self.post_raw(body, headers)
        return status, time.monotonic() - started, key

    async def press(
        self,
        slack: fake_slack.FakeSlack,
        blocks: list[dict[str, Any]],
        action_id: str,
        user: str,
        key: str | None = None,
        value: str | None = None,
    ) -> str:
        """Press a button of an ephemeral answer; returns the key of its response_url."""
        element = next(
            (
                e
                for b in blocks
                for e in ([b.get("accessory")] if b.get("accessory") else [])
                + b.get("elements", [])
                if e and e.get("action_id") == action_id
            ),
            None,
        )
        assert element is not None or value is not None, f"no {action_id} button"
        key = key or f"press-{user}-{time.monotonic_ns()}"
        status, _ = await self._interact(
            {
                "type": "block_actions",
                "user": {"id": user, "team_id": fake_slack.TEAM_ID},
                "trigger_id": "t",
                "container": {"type": "message", "is_ephemeral": True},
                "response_url": slack.response_url(key),
                "actions": [
                    {
                        "type": "button",
                        "action_id": action_id,
                        "block_id": "b",
                        "value": value if value is not None else (element or {})["value"],
                        "action_ts": "1.0",
                    }
                ],
            }
        )
        assert status == 200
        return key

    async def submit_view(
        self, view: dict[str, Any], user: str, values: Mapping[str, Chosen]
    ) -> tuple[int, str]:
        """A person submits a modal the bot opened: `values` says what they typed or chose
        (tests/fakes/view_state.py); the other inputs send what they showed, as in Slack."""
        state = view_state(view, dict(values))
        return await self._interact(
            {
                "type": "view_submission",
                "user": {"id": user, "team_id": fake_slack.TEAM_ID},
                "trigger_id": "t",
                "view": {**view, "id": "V1", "state": {"values": state}},
            }
        )


@dataclass(kw_only=True)
class RunningBot(SlackFront):
    """A bot served in this process (its objects are there to inspect)."""

    countersign: Countersign
    stop: asyncio.Event
    task: asyncio.Task[None]

    async def click_value(
        self,
        proposal_id: int,
        action_id: str,
        user: str,
        channel: str,
        slack: fake_slack.FakeSlack,
    ) -> int:
        """Click a button of the card of `proposal_id`, as its current revision shows it."""
        revision = (await self.countersign.approvals.get(proposal_id)).revision
        for card in slack.cards(channel):
            card = fake_slack.StoredMessage(
                card.ts,
                card.text,
                card.user,
                card.bot_id,
                card.thread_ts,
                blocks=[
                    {
                        "type": "actions",
                        "elements": [
                            {"action_id": action_id, "value": f"{proposal_id}:{revision}"}
                        ],
                    }
                ],
            )
            return await self.click(card, action_id, user, channel)
        raise AssertionError("no card in that channel")

    handoffs: Handoffs = field(default_factory=lambda: Handoffs())

    async def idle(self, timeout: float = 30.0) -> None:
        """Wait until every event and click sent has reached its listener and every turn has
        finished. (The front door answers events and clicks before the main loop has taken
        them up: on a loaded machine, waiting for running turns alone could find none yet.)"""
        deadline = time.monotonic() + timeout
        await asyncio.sleep(0)  # what was just handed to the loop gets a step first
        while self.handoffs.pending or self.countersign.tasks.running:
            if time.monotonic() > deadline:
                raise AssertionError("turns still running")
            await asyncio.sleep(0.02)


class Handoffs:
    """Requests the front door handed to the main loop whose dispatch has not finished: counted
    on the front door's thread when it hands one on (before it answers Slack), uncounted on
    the main loop once Bolt's listener returned (having started its turn, if any)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending = 0

    @property
    def pending(self) -> int:
        with self._lock:
            return self._pending

    def watch(self, countersign: Countersign) -> None:
        dispatch = countersign.bolt.async_dispatch

        def counted(request: Any) -> Coroutine[Any, Any, Any]:
            with self._lock:
                self._pending += 1
            return self._finished(dispatch(request))

        countersign.bolt.async_dispatch = counted  # type: ignore[method-assign,assignment]

    async def _finished(self, dispatched: Coroutine[Any, Any, T]) -> T:
        try:
            return await dispatched
        finally:
            with self._lock:
                self._pending -= 1


async def start_bot(settings: Settings) -> RunningBot:
    countersign = Countersign.build(settings)
    handoffs = Handoffs()
    handoffs.watch(countersign)
    stop = asyncio.Event()
    started: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(serve_http(countersign, "127.0.0.1", 0, stop, started))
    port = await asyncio.wait_for(started, 30)
    session = aiohttp.ClientSession()
    return RunningBot(
        url=f"http://127.0.0.1:{port}",
        session=session,
        countersign=countersign,
        stop=stop,
        task=task,
        handoffs=handoffs,
    )


async def stop_bot(bot: RunningBot) -> None:
    bot.stop.set()
    await asyncio.wait_for(bot.task, 60)
    await bot.session.close()


@asynccontextmanager
async def running(
    slack: fake_slack.FakeSlack, model: fake_openai.FakeOpenAI, database_url: str, **settings: Any
) -> AsyncIterator[RunningBot]:
    """A bot made with `make_settings(slack, model, database_url, **settings)`, stopped after."""
    bot = await start_bot(make_settings(slack, model, database_url, **settings))
    try:
        yield bot
    finally:
        await stop_bot(bot)
