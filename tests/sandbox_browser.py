"""Helpers for the sandbox's browser tests: the sandbox (and the bot it starts) as a process,
headless Chromium from the system (Playwright never downloads a browser here)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.harness import clean_env

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("CHROMIUM_PATH") or shutil.which("chromium") or "/usr/bin/chromium"
TIMEOUT_MS = 20_000


def chromium_path() -> str:
    """Debian's Chromium; missing, the browser tests fail (a skip would hide them): ./test.sh
    installs it where it can (root with apt-get), elsewhere install it yourself."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no Chromium at {CHROMIUM}: apt-get install chromium, or set CHROMIUM_PATH")
    return CHROMIUM


ADDRESS = re.compile(r"http://127\.0\.0\.1:\d+/\?key=[0-9a-f]+")


def address_in(line: str) -> str:
    """The page's address in the line the sandbox prints (its key included)."""
    found = ADDRESS.search(line)
    assert found, f"no address in {line!r}"
    return found.group(0)


def base_of(address: str) -> str:
    """http://127.0.0.1:PORT of the page's address."""
    parts = urllib.parse.urlsplit(address)
    return f"{parts.scheme}://{parts.netloc}"


def key_of(address: str) -> str:
    return urllib.parse.parse_qs(urllib.parse.urlsplit(address).query)["key"][0]


def bot_token(address: str) -> str:
    """The bot token this sandbox answers (and gave its bot)."""
    return f"xoxb-{key_of(address)}"


def ui_post(address: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST JSON to a page route (`/ui/...`) as the page would, with the page's key."""
    request = urllib.request.Request(  # noqa: S310 - the sandbox on loopback
        f"{base_of(address)}{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "X-Sandbox-Key": key_of(address)},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
        found: dict[str, Any] = json.loads(answer.read())
        return found


def state(address: str) -> dict[str, Any]:
    """Every channel's messages, as the page sees them (`address`: the printed one)."""
    url = f"{base_of(address)}/api/state?key={key_of(address)}"
    with urllib.request.urlopen(url, timeout=5) as answer:  # noqa: S310
        found: dict[str, Any] = json.loads(answer.read())
        return found


@contextmanager
def running_sandbox(**env: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`python -m sandbox` on a free port, until the bot it started is connected; yields the
    page's address as printed (key included). Alice's demo budget is off unless `env` turns
    it on (`SANDBOX_DEMO_BUDGET=on`): the tests' Alice asks far more than two questions. The
    demo model types fast unless `env` sets `SANDBOX_WORD_DELAY`."""
    env.setdefault("SANDBOX_DEMO_BUDGET", "off")
    # The demo's plain answer types at a newcomer's pace (six seconds); only a test watching a
    # reply grow needs that (it passes SANDBOX_WORD_DELAY itself).
    env.setdefault("SANDBOX_WORD_DELAY", "0.005")
    process = subprocess.Popen(
        [sys.executable, "-m", "sandbox"],
        env=clean_env(SANDBOX_PORT="0", LOG_LEVEL="WARNING", **env),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        base = address_in(process.stdout.readline())
        deadline = time.monotonic() + 60
        while not state(base)["bot"]["connected"]:
            assert process.poll() is None, "the sandbox stopped"
            assert time.monotonic() < deadline, "the bot did not connect"
            time.sleep(0.1)
        yield base, process
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
