"""Start time, measured (docs/benchmarks.md, issue 28 "Start fast").

The bot is launched as people launch it, `python -m bot run` in a process of its own, in Socket
Mode against the fake Slack (tests/fakes/slack.py serves `apps.connections.open` and the
WebSocket) and the fake model. One run is the time from the launch to the WebSocket opened at
the fake; then the bot is stopped with SIGTERM. The database is one SQLite file kept across the
runs of a configuration, as a deployment keeps it: the first (unmeasured) start migrates it, the
measured ones find it at head. Separately, `import bot.app` in a fresh interpreter, timed inside
it.

Configurations: `plain` (the newcomer's start: Slack and a model, nothing else), `typical`
(an OpenAI model name, so the token encoding is loaded, and examples/policy.yaml), and
`integrations` (`typical` plus the GitHub and Linear packs and one stdio MCP server, the
tests' notebook). Each line also gives the CPU seconds spent, less swayed by a busy machine.

    uv run python -m bench.start [--runs 5] [--only plain,typical,integrations] [--tree DIR]

`--tree DIR` starts the bot from another source tree with the same interpreter and packages,
for a before/after in one sitting: `git archive main | tar -x -C /tmp/before` then
`--tree /tmp/before` (the MCP server of `integrations` is this tree's).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.fakes import openai as fake_openai
from tests.fakes import slack as fake_slack
from tests.harness import clean_env

ROOT = Path(__file__).resolve().parent.parent


def clean(**values: str) -> dict[str, str]:
    """The harness's clean environment, with the bytecode kept: warm means imports compiled
    once, as an installed package runs (this machine's environment sets
    PYTHONDONTWRITEBYTECODE, which would compile every import at every start)."""
    env = clean_env(**values)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


CONNECT_TIMEOUT = 60.0
POLICY = ROOT / "examples" / "policy.yaml"  # with CEL conditions
IMPORT_APP = (
    "import time; started = time.perf_counter(); cpu = time.process_time(); import bot.app; "
    "print(time.perf_counter() - started, time.process_time() - cpu)"
)


def environment(
    slack: fake_slack.FakeSlack,
    model: fake_openai.FakeOpenAI,
    folder: Path,
    config: str,
    tree: Path,
) -> dict[str, str]:
    env = clean(
        PYTHONPATH=str(tree),
        SLACK_BOT_TOKEN=fake_slack.BOT_TOKEN,
        SLACK_APP_TOKEN=fake_slack.APP_TOKEN,
        SLACK_API_URL=slack.api_url,
        OPENAI_API_KEY=fake_openai.API_KEY,
        OPENAI_BASE_URL=model.base_url,
        LLM_MODEL=fake_openai.MODEL,
        DATABASE_URL=f"sqlite:///{folder / 'bot.db'}",
        LOG_LEVEL="WARNING",
    )
    if config in ("typical", "integrations"):
        env.update(LLM_MODEL="gpt-4o-mini", POLICY_FILE=str(POLICY))
    if config == "integrations":
        notes = {
            "command": sys.executable,
            "args": ["-m", "tests.mcp_servers.notes", "stdio"],
            "env": {"NOTES_LOG": str(folder / "notes.log"), "PYTHONPATH": str(ROOT)},
            "cwd": str(ROOT),
        }
        env.update(
            GITHUB_TOKEN="ghp-bench-token",  # fake: never sent anywhere
            GITHUB_API_URL="http://127.0.0.1:9/",
            LINEAR_API_KEY="lin-bench-key",
            LINEAR_API_URL="http://127.0.0.1:9/graphql",
            MCP_SERVERS=json.dumps({"mcpServers": {"notes": notes}}),
        )
    return env


def cpu_seconds(pid: int) -> float:
    """The process's CPU time so far (user + system), from /proc: less swayed by the other
    processes on the machine than the wall-clock time."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_start(
    slack: fake_slack.FakeSlack, env: dict[str, str], folder: Path
) -> tuple[float, float]:
    """Seconds from launching `python -m bot run` to its WebSocket opened at the fake, and the
    CPU seconds it spent until then."""
    slack.socket_connected.clear()
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "bot", "run"],
        env=env,
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        if not slack.socket_connected.wait(CONNECT_TIMEOUT):
            raise RuntimeError("the bot did not connect")
        return time.monotonic() - started, cpu_seconds(process.pid)
    except RuntimeError:
        process.kill()
        _, err = process.communicate(timeout=30)
        raise RuntimeError(f"the bot did not connect within {CONNECT_TIMEOUT} s:\n{err}") from None
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.communicate()


def import_time(tree: Path) -> tuple[float, float]:
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_APP],
        cwd=tree,
        env=clean(PYTHONPATH=str(tree)),
        capture_output=True,
        text=True,
        check=True,
    )
    wall, cpu = done.stdout.split()
    return float(wall), float(cpu)


def summary(runs: list[tuple[float, float]]) -> str:
    wall = [w for w, _ in runs]
    cpu = [c for _, c in runs]
    return (
        f"p50 {statistics.median(wall):.2f} s, max {max(wall):.2f} s "
        f"(CPU p50 {statistics.median(cpu):.2f} s)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", default="plain,typical,integrations")
    parser.add_argument(
        "--tree",
        type=Path,
        default=ROOT,
        help="the source tree of the bot to start (e.g. `git archive main` unpacked): before/after",
    )
    args = parser.parse_args()
    tree = args.tree.resolve()
    print(f"bot from {tree}")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    imports = [import_time(tree) for _ in range(args.runs + 1)][1:]  # the first warms up
    print(f"import bot.app            : {summary(imports)}")
    slack = fake_slack.FakeSlack().start()
    model = fake_openai.FakeOpenAI().start()
    try:
        for config in args.only.split(","):
            with tempfile.TemporaryDirectory(prefix="countersign-start-") as tmp:
                folder = Path(tmp)
                env = environment(slack, model, folder, config, tree)
                one_start(slack, env, folder)  # migrates the new database; not measured
                times = [one_start(slack, env, folder) for _ in range(args.runs)]
            print(f"launch -> connected {config:<13}: {summary(times)}")
    finally:
        model.stop()
        slack.stop()
    print(f"load average after : {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
