"""How the sandbox starts: `./run.sh` picks it when there are no Slack settings (and runs the
bot against Slack when there are), and `countersign try` starts it, bot included."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.harness import clean_env
from tests.sandbox_browser import state

ROOT = Path(__file__).resolve().parent.parent
FAKE_UV = """#!/bin/sh
# Stands in for uv: `sync` does nothing, `run ... countersign ARGS` prints ARGS.
if [ "$1" = "run" ]; then
  while [ "$1" != "countersign" ]; do shift; done
  echo "$*"
fi
"""


@pytest.fixture
def copy_of_run_sh(tmp_path: Path) -> Path:
    """run.sh and its bootstrap in a folder of their own, with a stand-in uv on PATH."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "run.sh", tmp_path / "run.sh")
    shutil.copy(ROOT / "scripts" / "bootstrap.sh", tmp_path / "scripts" / "bootstrap.sh")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "uv").write_text(FAKE_UV)
    (bin_dir / "uv").chmod(0o755)
    return tmp_path


def run_sh(folder: Path, **env: str) -> str:
    path = f"{folder / 'bin'}:{os.environ['PATH']}"
    done = subprocess.run(
        [shutil.which("bash") or "/bin/bash", str(folder / "run.sh")],
        env=clean_env(PATH=path, **env),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return done.stdout.strip()


def test_run_sh_without_slack_settings_starts_the_sandbox(copy_of_run_sh: Path) -> None:
    assert run_sh(copy_of_run_sh) == "countersign try"


def test_run_sh_with_slack_settings_runs_against_slack(copy_of_run_sh: Path) -> None:
    assert run_sh(copy_of_run_sh, SLACK_BOT_TOKEN="xoxb-1") == "countersign run"
    (copy_of_run_sh / ".env").write_text("SLACK_BOT_TOKEN=xoxb-from-dotenv\n")
    assert run_sh(copy_of_run_sh) == "countersign run"


def test_countersign_try_prints_the_address_and_runs_the_bot_against_the_sandbox() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "bot", "try", "--port", "0"],
        env=clean_env(LOG_LEVEL="WARNING"),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:\d+", line)
        assert found, line
        assert "demo model" in line
        deadline = time.monotonic() + 60
        while not state(found.group(0))["bot"]["connected"]:
            assert time.monotonic() < deadline, "the bot did not connect"
            time.sleep(0.1)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
