"""Starts the unchanged bot as a child process, pointed at the sandbox: Slack's Web API and
Socket Mode here, its own SQLite file, the four-eyes policy with Bob as the approver, and the
demo model unless `OPENAI_*` settings name a real one (in the environment or `.env`)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

POLICY = {"*": {"approvers": ["UBOB"], "four_eyes": True}}
DATABASE = "countersign.db"  # the bot's SQLite file, in the sandbox's data folder
# Settings of a real Slack that must not leak into the bot's view of the sandbox.
DROPPED = ("SLACK_", "DATABASE_URL", "METRICS_PORT", "REDIS_URL")


def dotenv(path: Path = Path(".env")) -> dict[str, str]:
    """The `NAME=value` lines of a `.env` file (enough to see which settings it holds)."""
    values: dict[str, str] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return values
    for line in lines:
        name, sep, value = line.strip().removeprefix("export ").partition("=")
        if sep and not name.startswith("#"):
            values[name.strip().upper()] = value.strip().strip("'\"")
    return values


def has_model_settings(env: dict[str, str]) -> bool:
    return bool(env.get("OPENAI_API_KEY") or dotenv().get("OPENAI_API_KEY"))


def bot_env(base: str, data_dir: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """The bot's environment: `base` is the sandbox's address, e.g. http://127.0.0.1:3000."""
    source = dict(os.environ if env is None else env)
    child = {k: v for k, v in source.items() if not k.startswith(DROPPED)}
    child.update(
        SLACK_BOT_TOKEN="xoxb-sandbox",  # noqa: S106 - the sandbox takes any xoxb-/xapp- token
        SLACK_APP_TOKEN="xapp-sandbox",  # noqa: S106
        SLACK_API_URL=f"{base}/api/",
        DATABASE_URL=f"sqlite:///{data_dir / DATABASE}",
    )
    child.setdefault("APPROVAL_POLICIES", json.dumps(POLICY))
    child.setdefault("LOG_LEVEL", "WARNING")  # the terminal shows the address, not migrations
    if not has_model_settings(source):
        child.update(
            OPENAI_API_KEY="sk-sandbox-demo",
            OPENAI_BASE_URL=f"{base}/demo-model/v1",
            LLM_MODEL="countersign-demo",
        )
    return child


async def start_bot(base: str, data_dir: Path) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "run", env=bot_env(base, data_dir)
    )
