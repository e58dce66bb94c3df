"""Logs never carry a secret: not in messages, not in tracebacks, not in JSON lines."""

from __future__ import annotations

import json
import logging

import pytest

from bot.logs import configure, log_context

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
