"""Logs never carry a secret: not in messages, not in tracebacks, not in JSON lines."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest

from bot.logs import configure, log_context
from tests.fakes.openai import FakeOpenAI
from tests.fakes.slack import FakeSlack
from tests.mcp_helpers import HttpNotes, free_port, stdio_server
from tests.test_runtime import bot_env

SECRETS = {
    "bot token": "xoxb-1111-2222-abcdefgh",
    "app token": "xapp-1-A0123-4567-abcdef",
    "refresh token": "xoxe-1-My0xLTYyNDE4NDQ",
    "rotated token": "xoxe.xoxp-1-Mi0yLTQ2NjE",
    "openai key": "sk-proj-abcdefghijklmnop",
    "signing secret": "8f14e45fceea167a5a36dedd4bea2543",
    "database password": "hunter2hunter2",
}


def emit(json_lines: bool) -> None:
    configure("INFO", [SECRETS["signing secret"]], json_lines)
    log = logging.getLogger("countersign.test")
    log.info("calling with %s", SECRETS["bot token"])
    try:
        url = f"postgresql://bot:{SECRETS['database password']}@db:5432/cs"
        raise RuntimeError(
            f"auth failed for {SECRETS['app token']} {SECRETS['refresh token']} "
            f"{SECRETS['rotated token']} {SECRETS['openai key']} at {url}"
        )
    except RuntimeError:
        with log_context(conversation_id=7, proposal_id=42):
            log.exception("it broke; secret was %s", SECRETS["signing secret"])


@pytest.mark.parametrize("json_lines", [False, True])
def test_no_secret_reaches_the_log_even_inside_a_traceback(
    capsys: pytest.CaptureFixture[str], json_lines: bool
) -> None:
    try:
        emit(json_lines)
    finally:
        logging.getLogger().handlers.clear()
    out = capsys.readouterr().err
    assert "Traceback" in out or '"exception"' in out  # the traceback is there, redacted
    for what, secret in SECRETS.items():
        assert secret not in out, what
    assert "[redacted]" in out


def test_json_lines_carry_the_ids_of_what_they_concern(capsys: pytest.CaptureFixture[str]) -> None:
    try:
        emit(json_lines=True)
    finally:
        logging.getLogger().handlers.clear()
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    first, second = lines
    assert "conversation_id" not in first
    assert (second["conversation_id"], second["proposal_id"]) == (7, 42)
    assert second["level"] == "ERROR"
    assert "RuntimeError" in second["exception"]


def test_configured_secrets_of_four_characters_and_more_are_redacted_by_value(
    capsys: pytest.CaptureFixture[str],
) -> None:
    short, medium = "q7Zr", "Xk29p"
    try:
        configure("INFO", [short, medium, "abc"])
        log = logging.getLogger("countersign.test")
        log.info("pin=%s code %s, inside a url /x?team=%s&y=1", short, medium, medium)
        log.info("the word abc stays, and so do q7Zrs and aXk29pb")
    finally:
        logging.getLogger().handlers.clear()
    first, second = capsys.readouterr().err.splitlines()
    assert short not in first
    assert medium not in first
    assert first.count("[redacted]") == 3
    # Too short to be a secret (3), or a longer word that merely contains one: left alone.
    assert "the word abc stays, and so do q7Zrs and aXk29pb" in second


async def test_a_running_bot_logs_no_secret_from_mcp_servers_urls_or_http_clients(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, tmp_path: Path
) -> None:
    """The real process: a stdio server that prints its credential and a 5-character PIN to
    its stderr, and an HTTP server whose URL carries a `${VAR}` token in its query. Every byte
    the bot writes (stdout and stderr) is read; no secret may appear in it."""
    credential, pin, team = "notes-credential-7f3a9c", "q7Zr5", "tm-0x5eedc0de"
    notes = await HttpNotes(tmp_path / "web.jsonl").start()
    stdio = stdio_server(tmp_path / "stdio.jsonl")
    stdio["env"] |= {
        "NOTES_CHATTY": "1",
        "NOTES_CREDENTIAL": "${STDIO_CREDENTIAL}",
        "NOTES_PIN": "${STDIO_PIN}",
    }
    servers = {"notes": stdio, "web": {"url": notes.url + "?team=${WEB_TEAM}"}}
    port = free_port()
    env = bot_env(
        fake_slack,
        fake_model,
        tmp_path,
        MCP_SERVERS=json.dumps({"mcpServers": servers}),
        MCP_CHECK_SECONDS="0.2",
        STDIO_CREDENTIAL=credential,
        STDIO_PIN=pin,
        WEB_TEAM=team,
        LOG_LEVEL="DEBUG",
    )
    out_file, err_file = tmp_path / "bot.out", tmp_path / "bot.log"
    with out_file.open("w") as stdout, err_file.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "bot", "serve", "--host", "127.0.0.1", "--port", str(port)],
            env=env,
            cwd=tmp_path,
            stdout=stdout,
            stderr=stderr,
        )
    try:
        await wait_healthy(process, port)
        await asyncio.sleep(1.5)  # a few re-listings of both servers, each an HTTP request
        process.send_signal(signal.SIGTERM)
        await asyncio.to_thread(process.wait, 60)
    finally:
        if process.poll() is None:
            process.kill()
        notes.kill()
    out, err = out_file.read_text(), err_file.read_text()
    assert process.returncode == 0, err
    for what, secret in {"credential": credential, "pin": pin, "url's team": team}.items():
        assert secret not in out, what
        assert secret not in err, what
    # The server's line reached the log, through the logger, redacted.
    assert "MCP server notes says: notes: connecting with [redacted] (pin [redacted])" in err
    assert "MCP server web is up" in err


async def wait_healthy(process: subprocess.Popen[bytes], port: int) -> None:
    deadline = time.monotonic() + 30
    async with aiohttp.ClientSession() as session:
        while True:
            try:
                async with session.get(f"http://127.0.0.1:{port}/healthz") as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("the bot did not start")
            await asyncio.sleep(0.1)
