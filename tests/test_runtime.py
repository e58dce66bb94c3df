"""The processes people run: Socket Mode, SIGTERM during live replies, and `doctor`."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest
from slack_sdk.signature import SignatureVerifier

from bot.app import Countersign
from bot.server import run_socket_mode
from tests.fakes import openai as fake_openai
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import APP_TOKEN, BOT_TOKEN, BOT_USER_ID, FakeSlack, event_body, wait_until
from tests.harness import SIGNING_SECRET, clean_env, make_settings, run_cli


async def test_socket_mode_uses_the_configured_api_url_and_replies(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    fake_model.script(Script(text="Hello over the socket."))
    settings = make_settings(fake_slack, fake_model, sqlite_url, slack_app_token=APP_TOKEN)
    countersign = Countersign.build(settings)
    stop = asyncio.Event()
    runner = asyncio.create_task(run_socket_mode(countersign, stop))
    try:
        await wait_until(fake_slack.socket_connected.is_set, timeout=15)
        assert fake_slack.calls_to("apps.connections.open")[0].ok
        text = f"<@{BOT_USER_ID}> hi"
        ts = fake_slack.add_user_message("C9", text)
        body = event_body(
            {"type": "app_mention", "user": "UALICE", "text": text, "ts": ts, "channel": "C9"},
            "EvSock1",
        )
        await asyncio.to_thread(fake_slack.push_socket_event, body, "env-1")
        await wait_until(
            lambda: any(a.get("envelope_id") == "env-1" for a in fake_slack.socket_acks), timeout=5
        )
        await wait_until(
            lambda: [m.text for m in fake_slack.bot_messages("C9")] == ["Hello over the socket."],
            timeout=10,
        )
    finally:
        stop.set()
        await asyncio.wait_for(runner, 30)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bot_env(slack: FakeSlack, model: FakeOpenAI, tmp_path: Path, **extra: str) -> dict[str, str]:
    return clean_env(
        SLACK_BOT_TOKEN=BOT_TOKEN,
        SLACK_SIGNING_SECRET=SIGNING_SECRET,
        SLACK_API_URL=slack.api_url,
        OPENAI_API_KEY=fake_openai.API_KEY,
        OPENAI_BASE_URL=model.base_url,
        LLM_MODEL=fake_openai.MODEL,
        DATABASE_URL=f"sqlite:///{tmp_path / 'bot.db'}",
        **{"STREAMING": "edit", **extra},  # native streaming has tests of its own
    )


async def start_process(env: dict[str, str], port: int, cwd: Path) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "bot", "serve", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 30
    async with aiohttp.ClientSession() as session:
        while True:
            try:
                async with session.get(f"http://127.0.0.1:{port}/healthz") as response:
                    if response.status == 200:
                        return process
            except aiohttp.ClientError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                out = process.stdout.read() if process.stdout else ""
                raise AssertionError(f"bot did not start:\n{out}")
            await asyncio.sleep(0.1)


async def send_mention(port: int, slack: FakeSlack, channel: str) -> str:
    text = f"<@{BOT_USER_ID}> long answer please"
    ts = slack.add_user_message(channel, text)
    body = json.dumps(
        event_body(
            {"type": "app_mention", "user": "UALICE", "text": text, "ts": ts, "channel": channel},
            f"Ev{channel}",
        )
    ).encode()
    stamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/json",
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": str(
            SignatureVerifier(SIGNING_SECRET).generate_signature(
                timestamp=stamp, body=body.decode()
            )
        ),
    }
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"http://127.0.0.1:{port}/slack/events", data=body, headers=headers
        ) as response,
    ):
        assert response.status == 200
    return ts


@pytest.mark.parametrize(("grace", "finishes"), [("30", True), ("0.5", False)])
async def test_sigterm_finishes_or_finalises_live_replies(  # and a healthy run is quiet
    fake_slack: FakeSlack, fake_model: FakeOpenAI, tmp_path: Path, grace: str, finishes: bool
) -> None:
    scripted = " ".join(f"t{i}" for i in range(40))
    fake_model.script(Script(text=scripted, tokens_per_second=20))
    port = free_port()
    process = await start_process(
        bot_env(fake_slack, fake_model, tmp_path, SHUTDOWN_GRACE_SECONDS=grace), port, tmp_path
    )
    try:
        await send_mention(port, fake_slack, "C1")
        await wait_until(
            lambda: any(len(fake_slack.history[m.ts]) >= 2 for m in fake_slack.bot_messages("C1")),
            timeout=10,
        )
        process.send_signal(signal.SIGTERM)
        output, _ = await asyncio.to_thread(process.communicate, timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, output
    assert "xoxb-" not in output  # tokens never reach the logs
    (reply,) = fake_slack.bot_messages("C1")
    if finishes:
        assert reply.text == scripted
        said_while_healthy(output)
    else:
        assert "Interrupted" in reply.text
        assert not reply.text.endswith("▍")


def said_while_healthy(output: str) -> None:
    """A healthy run (SLACK_BOT_TOKEN in the environment, as people set it, and as Bolt reads
    it too) says what it does while starting, in order, and warns of nothing."""
    steps = ["connecting to the database sqlite:///", "(migrating)", "HTTP mode: listening on"]
    found = [output.find(step) for step in steps]
    assert -1 not in found, output
    assert found == sorted(found), output  # each step, in order
    assert "WARNING" not in output
    assert "Traceback" not in output
    assert "alembic.runtime.plugins" not in output  # lines that tell a person nothing


def test_doctor_reports_each_check(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, tmp_path: Path
) -> None:
    env = bot_env(fake_slack, fake_model, tmp_path)
    ok = run_cli(["doctor"], env, tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "[ok] database" in ok.stdout
    assert "[ok] slack" in ok.stdout
    assert "[ok] llm" in ok.stdout
    assert "[ok] redis: not configured" in ok.stdout
    assert "all checks passed" in ok.stdout

    env.update(
        {
            "SLACK_BOT_TOKEN": "xoxb-revoked",
            "LLM_MODEL": "gpt-nope",
            "DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none",
            "REDIS_URL": "redis://127.0.0.1:1/0",
        }
    )
    bad = run_cli(["doctor"], env, tmp_path)
    assert bad.returncode == 1
    assert "[FAIL] slack: auth.test said invalid_auth" in bad.stdout
    assert "[FAIL] llm: model 'gpt-nope' is not served here" in bad.stdout
    assert "[FAIL] database: cannot connect" in bad.stdout
    assert "[FAIL] redis: cannot reach REDIS_URL" in bad.stdout
    assert "4 check(s) failed" in bad.stdout
    assert "Traceback" not in bad.stdout + bad.stderr
