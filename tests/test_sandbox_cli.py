"""How the sandbox starts: `./run.sh` picks it when there are no Slack settings (and runs the
bot against Slack when there are), and `countersign try` starts it, bot included."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.harness import clean_env, run_cli
from tests.sandbox_browser import address_in, state

ROOT = Path(__file__).resolve().parent.parent
FAKE_UV = """#!/bin/sh
# Stands in for uv: `sync` makes .venv (and installs nothing), `run ... countersign ARGS`
# prints ARGS.
if [ "$1" = "sync" ]; then mkdir -p .venv; fi
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
    (tmp_path / "uv.lock").write_text("version = 1\n")
    (tmp_path / "pyproject.toml").write_text("[project]\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "uv").write_text(FAKE_UV)
    (bin_dir / "uv").chmod(0o755)
    return tmp_path


def run_sh(folder: Path, *args: str, **env: str) -> str:
    return started(folder, *args, **env).stdout.strip()


def started(folder: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    path = f"{folder / 'bin'}:{os.environ['PATH']}"
    return subprocess.run(
        [shutil.which("bash") or "/bin/bash", str(folder / "run.sh"), *args],
        env=clean_env(PATH=path, **env),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )


def test_run_sh_without_slack_settings_starts_the_sandbox(copy_of_run_sh: Path) -> None:
    assert run_sh(copy_of_run_sh) == "countersign try"


def test_run_sh_with_slack_settings_runs_against_slack(copy_of_run_sh: Path) -> None:
    assert run_sh(copy_of_run_sh, SLACK_BOT_TOKEN="xoxb-1") == "countersign run"
    (copy_of_run_sh / ".env").write_text("SLACK_BOT_TOKEN=xoxb-from-dotenv\n")
    assert run_sh(copy_of_run_sh) == "countersign run"


def test_run_sh_says_what_it_does_before_the_bot_can(copy_of_run_sh: Path) -> None:
    """Installing dependencies is announced when it will take a while (a new .venv, a changed
    lock), not on every start; then what starts."""
    first = started(copy_of_run_sh)
    assert first.stderr.splitlines() == [
        "Installing dependencies into .venv (the first time takes a minute or two) ...",
        "Dependencies installed.",
        "Starting the sandbox ...",
    ]
    assert started(copy_of_run_sh).stderr.splitlines() == ["Starting the sandbox ..."]
    with (copy_of_run_sh / "uv.lock").open("a") as lock:
        lock.write("# a dependency changed\n")
    again = started(copy_of_run_sh, "serve", "--port", "8080", SLACK_BOT_TOKEN="xoxb-1")
    assert again.stderr.splitlines()[0].startswith("Installing dependencies")
    assert again.stderr.splitlines()[-1] == "Starting Countersign ..."
    assert again.stdout.strip() == "countersign serve --port 8080"
    assert started(copy_of_run_sh, "doctor").stderr == ""  # a command's output stays its own


def test_countersign_try_keep_runs_the_bot_quietly_and_keeps_its_database(tmp_path: Path) -> None:
    """`countersign try --keep`: the address, what it is doing, the bot connected without a
    warning, and after Ctrl-C the database where it said, usable with DATABASE_URL alone."""
    errors = tmp_path / "stderr"
    with errors.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "bot", "try", "--port", "0", "--keep"],
            env=clean_env(TMPDIR=str(tmp_path)),  # the bot logs at the sandbox's default level
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            start_new_session=True,
        )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        address = address_in(line)
        assert "demo model" in line
        kept_line = process.stdout.readline()
        assert kept_line.startswith("The bot's database is kept after the sandbox stops: ")
        kept = Path(kept_line.split(": ", 1)[1].strip())
        assert kept.parent.parent == tmp_path
        assert process.stdout.readline().startswith("Starting the bot")
        deadline = time.monotonic() + 60
        while not state(address)["bot"]["connected"]:
            assert time.monotonic() < deadline, "the bot did not connect"
            time.sleep(0.1)
        process.send_signal(signal.SIGTERM)
        rest, _ = process.communicate(timeout=30)
        assert process.returncode == 0
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert f"Kept the bot's database: {kept}" in rest
    assert kept.is_file()
    said = errors.read_text()
    assert "WARNING" not in said, said
    assert "Traceback" not in said, said
    env = {"PATH": os.environ["PATH"], "DATABASE_URL": f"sqlite:///{kept}"}
    verified = run_cli(["audit", "verify"], env, tmp_path)
    assert verified.returncode == 0, verified.stdout + verified.stderr


def sandbox_alone(tmp_path: Path, port: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "sandbox", "--no-bot", "--port", str(port)],
        env=clean_env(TMPDIR=str(tmp_path)),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_without_keep_the_sandbox_leaves_nothing_behind(tmp_path: Path) -> None:
    process = sandbox_alone(tmp_path, 0)
    try:
        assert process.stdout is not None
        assert "Countersign sandbox: http://127.0.0.1:" in process.stdout.readline()
        deadline = time.monotonic() + 10
        while not list(tmp_path.glob("countersign-sandbox-*")):  # its folder, while it runs
            assert time.monotonic() < deadline, "the sandbox made no folder"
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, err
    assert not list(tmp_path.glob("countersign-sandbox-*"))
    assert "Kept" not in out


def test_a_busy_sandbox_port_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        process = sandbox_alone(tmp_path, port)
        out, err = process.communicate(timeout=60)
    assert process.returncode == 1
    assert out == ""
    assert err.strip() == (
        f"countersign sandbox: port {port} on 127.0.0.1 is already in use: stop what uses it, "
        "or choose another port with --port (or SANDBOX_PORT; 0 picks a free one)"
    )


def test_a_sandbox_port_that_is_no_number_names_its_setting(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bot", "try"],
        env=clean_env(SANDBOX_PORT="three thousand"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "'three thousand' is not a port (SANDBOX_PORT or --port)" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_word_delay_that_is_no_number_of_seconds_names_its_setting(tmp_path: Path) -> None:
    for bad in ("fast", "-1", "5"):
        done = subprocess.run(
            [sys.executable, "-m", "bot", "try"],
            env=clean_env(SANDBOX_WORD_DELAY=bad, SANDBOX_PORT="0"),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 2, done.stderr
        assert f"SANDBOX_WORD_DELAY='{bad}' is not a number of seconds from 0 to 1" in done.stderr
        assert "Traceback" not in done.stderr
        assert done.stdout == ""  # it stopped before serving anything
