"""Starting like a good command-line program: what stops a start is one line that says what to
do (exit code 1, no traceback, no password), and the commands that only need the database run
with `DATABASE_URL` alone. Each command is its own process (tests/cli_process.py)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.db.session import Database, create_engine
from bot.startup import StartupError, reach_database
from tests.fakes.openai import FakeOpenAI
from tests.fakes.slack import APP_TOKEN, BOT_TOKEN, FakeSlack
from tests.harness import run_cli
from tests.test_policy_file import NEW_POLICY
from tests.test_runtime import bot_env

PASSWORD = "hunter2-not-shown"  # a made-up password that must never be printed


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port something else listens on."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        yield int(other.getsockname()[1])


@pytest.fixture
def closed_port() -> int:
    """A port nothing listens on (bound and released at once)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def only(**values: str) -> dict[str, str]:
    """An environment with nothing but PATH and `values`: no Slack or model setting at all."""
    return {"PATH": os.environ["PATH"], **values}


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    """The command failed with exactly one line on stderr (and nothing else anywhere)."""
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert PASSWORD not in result.stdout + result.stderr
    return lines[0]


def test_a_busy_port_is_one_line_that_says_how_to_pick_another(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, tmp_path: Path, taken_port: int
) -> None:
    env = bot_env(fake_slack, fake_model, tmp_path, LOG_LEVEL="WARNING")
    args = ["serve", "--host", "127.0.0.1", "--port", str(taken_port)]
    line = one_line(run_cli(args, env, tmp_path, timeout=60))  # exits: no thread left behind
    assert line == (
        f"countersign: port {taken_port} on 127.0.0.1 is already in use (another Countersign?): "
        "stop what uses it, or choose another port with --port"
    )


def test_a_busy_metrics_port_names_its_setting(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, tmp_path: Path, taken_port: int
) -> None:
    env = bot_env(
        fake_slack, fake_model, tmp_path, LOG_LEVEL="WARNING", METRICS_PORT=str(taken_port)
    )
    line = one_line(run_cli(["serve", "--host", "127.0.0.1", "--port", "0"], env, tmp_path, 60))
    assert f"port {taken_port} on 127.0.0.1 is already in use" in line
    assert line.endswith("choose another port with METRICS_PORT")


@pytest.mark.parametrize("command", [["serve", "--port", "0"], ["run"]])
def test_an_unreachable_database_is_one_line_without_its_password(
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    tmp_path: Path,
    closed_port: int,
    command: list[str],
) -> None:
    url = f"postgresql://bob:{PASSWORD}@127.0.0.1:{closed_port}/countersign"
    extra = {"SLACK_APP_TOKEN": APP_TOKEN} if command == ["run"] else {}
    env = {
        **bot_env(fake_slack, fake_model, tmp_path, LOG_LEVEL="WARNING", **extra),
        "DATABASE_URL": url,
    }
    line = one_line(run_cli(command, env, tmp_path, timeout=60))
    assert line == (
        f"countersign: cannot reach the database at postgresql://bob:***@127.0.0.1:{closed_port}"
        "/countersign (connection refused): check DATABASE_URL and that the database server "
        "is running"
    )
    assert not fake_slack.calls_to("apps.connections.open")  # nothing started without it


def test_progress_lines_at_info_never_carry_the_password(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, tmp_path: Path, closed_port: int
) -> None:
    url = f"postgresql://bob:{PASSWORD}@127.0.0.1:{closed_port}/countersign"
    env = {**bot_env(fake_slack, fake_model, tmp_path, LOG_LEVEL="INFO"), "DATABASE_URL": url}
    result = run_cli(["serve", "--port", "0"], env, tmp_path, timeout=60)
    assert result.returncode == 1
    assert "connecting to the database postgresql://bob:" in result.stderr  # says what it waits on
    assert PASSWORD not in result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert "shutting down" not in result.stderr  # it never got going


def test_a_database_file_in_a_missing_folder_is_one_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'no-such-folder' / 'countersign.db'}"
    line = one_line(run_cli(["migrate"], only(DATABASE_URL=url, LOG_LEVEL="WARNING"), tmp_path))
    assert line == (
        f"countersign: cannot reach the database at {url} (unable to open database file): "
        "check DATABASE_URL (the file's folder must exist and be writable)"
    )


@pytest.mark.parametrize(
    "command", [["migrate"], ["audit", "verify"], ["audit", "export"], ["policy", "replay"]]
)
def test_database_commands_on_an_unreachable_database_are_one_line(
    tmp_path: Path, closed_port: int, command: list[str]
) -> None:
    url = f"postgres://bob:{PASSWORD}@127.0.0.1:{closed_port}/countersign"
    (tmp_path / "policy.yaml").write_text(NEW_POLICY)
    line = one_line(run_cli(command, only(DATABASE_URL=url, LOG_LEVEL="WARNING"), tmp_path))
    assert "cannot reach the database at postgresql://bob:***@127.0.0.1:" in line


def test_commands_that_only_read_the_database_need_only_database_url(tmp_path: Path) -> None:
    """`audit verify`, `audit export`, `policy replay` (and `migrate`) with no Slack or model
    setting in the environment, on a database of their own."""
    env = only(DATABASE_URL=f"sqlite:///{tmp_path / 'countersign.db'}")
    (tmp_path / "policy.yaml").write_text(NEW_POLICY)
    migrated = run_cli(["migrate"], env, tmp_path)
    assert migrated.returncode == 0, migrated.stderr
    assert "database is up to date" in migrated.stdout
    verified = run_cli(["audit", "verify"], env, tmp_path)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    exported = run_cli(["audit", "export", "--format", "jsonl"], env, tmp_path)
    assert exported.returncode == 0, exported.stderr
    assert "exported 0 proposal(s)" in exported.stderr
    replayed = run_cli(["policy", "replay", "--since", "30d"], env, tmp_path)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "replayed 0 decision(s)" in replayed.stdout
    for result in (migrated, verified, exported, replayed):
        assert "SLACK_BOT_TOKEN" not in result.stdout + result.stderr
        assert "OPENAI" not in result.stdout + result.stderr


def test_the_bot_itself_still_asks_for_its_slack_settings(tmp_path: Path) -> None:
    """Only the database commands were relaxed: `run` without Slack settings says which."""
    result = run_cli(["run"], only(DATABASE_URL=f"sqlite:///{tmp_path / 'c.db'}"), tmp_path)
    assert result.returncode == 2
    assert "SLACK_BOT_TOKEN" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_database_url_that_is_no_url_is_a_settings_error_without_its_password(
    tmp_path: Path,
) -> None:
    url = f"postgresql://bob:{PASSWORD}@127.0.0.1:fivefourthreetwo/countersign"
    for command in (["audit", "verify"], ["migrate"]):
        result = run_cli(command, only(DATABASE_URL=url), tmp_path)
        assert result.returncode == 2, result.stderr
        assert "DATABASE_URL is invalid (cannot be read as a URL" in result.stderr
        assert PASSWORD not in result.stdout + result.stderr
        assert "Traceback" not in result.stderr


def test_slack_refusing_the_socket_mode_connection_is_one_line(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, tmp_path: Path
) -> None:
    env = bot_env(fake_slack, fake_model, tmp_path, LOG_LEVEL="WARNING")
    env["SLACK_APP_TOKEN"] = "xapp-1-revoked-token"
    result = run_cli(["run"], env, tmp_path, timeout=60)
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        "countersign: Slack refused the Socket Mode connection (invalid_auth): check "
        "SLACK_APP_TOKEN (an app-level xapp- token with the connections:write scope)"
    )
    assert "Traceback" not in result.stderr
    assert "revoked-token" not in result.stderr


def test_an_unreachable_slack_is_one_line(
    fake_model: FakeOpenAI, tmp_path: Path, closed_port: int
) -> None:
    slack_url = f"http://127.0.0.1:{closed_port}/api/"
    env = {
        **only(
            SLACK_BOT_TOKEN=BOT_TOKEN,
            SLACK_APP_TOKEN=APP_TOKEN,
            SLACK_API_URL=slack_url,
            OPENAI_API_KEY="sk-test",
            OPENAI_BASE_URL=fake_model.base_url,
            DATABASE_URL=f"sqlite:///{tmp_path / 'c.db'}",
            LOG_LEVEL="WARNING",
        )
    }
    line = one_line(run_cli(["run"], env, tmp_path, timeout=60))
    assert line.startswith(f"countersign: cannot reach Slack at {slack_url} (")
    assert line.endswith("check SLACK_API_URL and the network")


def test_a_port_out_of_range_is_refused_by_the_command_line(tmp_path: Path) -> None:
    result = run_cli(["serve", "--port", "70000"], only(), tmp_path)
    assert result.returncode == 2
    assert "70000 is not a port: use 1 to 65535 (0: any free one)" in result.stderr
    assert "Traceback" not in result.stderr


# `python -m bot` with Ctrl-C as a terminal delivers it, even when the tests run in the
# background (where a shell starts them with SIGINT ignored, and their children inherit that).
CTRL_C_AS_IN_A_TERMINAL = (
    "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "sys.argv[0] = 'countersign'; runpy.run_module('bot', run_name='__main__')"
)


def test_ctrl_c_while_starting_stops_without_a_traceback(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, tmp_path: Path
) -> None:
    """Ctrl-C while the database is being set up, before the bot listens for signals."""
    env = bot_env(fake_slack, fake_model, tmp_path, LOG_LEVEL="INFO")
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            CTRL_C_AS_IN_A_TERMINAL,
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
        ],
        env=env,
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        seen = process.stderr.readline()
        assert "connecting to the database" in seen, seen
        process.send_signal(signal.SIGINT)
        _, rest = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert "Traceback" not in rest, rest
    # Interrupted while starting (130), or, on a fast machine, stopped once it listened (0).
    assert process.returncode in (130, 0), rest
    if process.returncode == 130:
        assert rest.strip().splitlines()[-1] == "countersign: interrupted"


def test_a_database_file_that_cannot_be_opened_leaves_no_thread_behind(tmp_path: Path) -> None:
    """The one line above must stay one line however the threads are scheduled: the driver's
    worker thread finishing after the command's event loop closed printed a traceback of its
    own (seen once in CI). Here the loop closes at once, as the command's does."""
    failures: list[threading.ExceptHookArgs] = []
    before = set(threading.enumerate())
    hook, threading.excepthook = threading.excepthook, failures.append
    try:
        url = f"sqlite:///{tmp_path / 'no-such-folder' / 'countersign.db'}"

        async def start() -> None:
            db = Database(create_engine(url))
            try:
                await reach_database(db)
            finally:
                await db.dispose()

        with pytest.raises(StartupError, match="unable to open database file"):
            asyncio.run(start())
        for thread in set(threading.enumerate()) - before:
            thread.join(timeout=5)
    finally:
        threading.excepthook = hook
    assert not failures, [str(failure.exc_value) for failure in failures]
