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


def state(base: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{base}/api/state", timeout=5) as answer:  # noqa: S310
        found: dict[str, Any] = json.loads(answer.read())
        return found


@contextmanager
def running_sandbox(**env: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`python -m sandbox` on a free port, until the bot it started is connected."""
    process = subprocess.Popen(
        [sys.executable, "-m", "sandbox"],
        env=clean_env(SANDBOX_PORT="0", LOG_LEVEL="WARNING", **env),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:\d+", first)
        assert found, f"no address in {first!r}"
        base = found.group(0)
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
