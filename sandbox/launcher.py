"""Starts the unchanged bot as a child process, pointed at the sandbox: Slack's Web API and
Socket Mode here (with the sandbox's per-start tokens), its own SQLite file, the four-eyes
policy with Bob as the approver, and the demo model unless `OPENAI_*` settings name a real one.

The bot starts from an allow-listed environment, in the sandbox's data folder: nothing of a
real install leaks in. Not a real Slack's tokens, database, Redis, metrics, policy
(`APPROVAL_POLICIES`, `POLICY_FILE`, a `policy.yaml`), GitHub, Linear or MCP settings; and the
bot never sees the `.env` of the folder the sandbox was started in (it runs elsewhere). Of that
`.env` only the model settings are taken (`OPENAI_API_KEY`, `OPENAI_BASE_URL`, `LLM_MODEL`),
when the environment has none: a real model is the one thing the sandbox may borrow."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

POLICY = {"*": {"approvers": ["UBOB"], "four_eyes": True}}
# Spend governed like a write (issue 29), shown with the demo model: Alice's questions use up a
# small daily budget in two or three questions (each counts its prompt, the tools' schemas
# included: about 2,000 tokens, and holds REPLY_TOKENS until it is answered), then her thread
# shows the pause card: continue on the demo's cheaper model, or ask Bob to raise it.
# `SANDBOX_DEMO_BUDGET=off` leaves it out.
DEMO_POLICY = """\
version: 1
default: ask
budgets:
  - name: alice-daily
    scope: {user: UALICE}
    window: day
    tokens: 8000
    owners: [UBOB]
    fallback_model: countersign-demo-mini
"""
DATABASE = "countersign.db"  # the bot's SQLite file, in the sandbox's data folder
PACKAGES = Path(__file__).resolve().parent.parent  # where `bot` and `sandbox` are installed
MODEL = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "LLM_MODEL")
# What the bot may inherit: the system's basics, and settings that only shape how it talks.
SYSTEM = (
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TEMP", "TMP",
    "SYSTEMROOT", "SYSTEMDRIVE", "WINDIR", "COMSPEC", "PATHEXT", "USERPROFILE", "APPDATA",
    "LOCALAPPDATA", "VIRTUAL_ENV", "SSL_CERT_FILE", "SSL_CERT_DIR", "PYTHONUTF8",
    "PYTHONIOENCODING", "PYTHONDONTWRITEBYTECODE", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
    "http_proxy", "https_proxy", "no_proxy",
)  # fmt: skip
BEHAVIOUR = (
    "LLM_TIMEOUT_SECONDS", "LLM_MAX_RETRIES", "MODEL_DEADLINE_SECONDS", "TITLE_MODEL",
    "TITLE_TIMEOUT_SECONDS", "STREAMING", "VISION", "TOKEN_BUDGET", "REPLY_TOKENS",
    "TOOL_RESULT_TOKENS",
    "SUMMARY_TOKENS", "HISTORY_WINDOW_MESSAGES", "THREAD_IMPORT_MESSAGES",
    "SUGGESTED_PROMPTS", "LOG_LEVEL", "LOG_FORMAT",
)  # fmt: skip


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


def model_settings(env: dict[str, str], folder: Path = Path()) -> dict[str, str]:
    """A real model's settings: the environment's, else those of `.env` in `folder`."""
    found = {name: env[name] for name in MODEL if env.get(name)}
    if found.get("OPENAI_API_KEY"):
        return found
    from_file = dotenv(folder / ".env")
    if not from_file.get("OPENAI_API_KEY"):
        return {}
    return {name: from_file[name] for name in MODEL if from_file.get(name)}


def has_model_settings(env: dict[str, str]) -> bool:
    return bool(model_settings(env))


def bot_env(
    base: str,
    data_dir: Path,
    tokens: tuple[str, str],
    env: dict[str, str] | None = None,
    folder: Path = Path(),
) -> dict[str, str]:
    """The bot's environment: `base` is the sandbox's address (e.g. http://127.0.0.1:3000),
    `tokens` its bot and app tokens (xoxb-KEY, xapp-KEY); `folder` where `.env` may be."""
    source = dict(os.environ if env is None else env)
    allowed = (*SYSTEM, *BEHAVIOUR)
    child = {k: v for k, v in source.items() if k in allowed or k.startswith("LC_")}
    child.update(
        SLACK_BOT_TOKEN=tokens[0],
        SLACK_APP_TOKEN=tokens[1],
        SLACK_API_URL=f"{base}/api/",
        DATABASE_URL=f"sqlite:///{data_dir / DATABASE}",
        APPROVAL_POLICIES=json.dumps(POLICY),
        PYTHONPATH=str(PACKAGES),  # the bot runs in the data folder, away from any .env
    )
    child.setdefault("LOG_LEVEL", "WARNING")  # the terminal shows the address, not migrations
    model = model_settings(source, folder)
    if model:
        child.update(model)
    else:
        key = tokens[0].removeprefix("xoxb-")
        child.update(
            OPENAI_API_KEY=f"sk-sandbox-{key}",
            OPENAI_BASE_URL=f"{base}/demo-model/v1",
            LLM_MODEL="countersign-demo",
        )
        if source.get("SANDBOX_DEMO_BUDGET", "on") != "off":
            child["POLICY_FILE"] = str(data_dir / "policy.yaml")  # DEMO_POLICY, written there
    return child


def bot_command(
    base: str, data_dir: Path, tokens: tuple[str, str], folder: Path = Path()
) -> tuple[list[str], dict[str, str], Path]:
    """How the bot is started: its command, environment and working folder (the data
    folder: no `.env` and no `policy.yaml` of the sandbox's folder reach the bot)."""
    command = [sys.executable, "-m", "bot", "run"]
    env = bot_env(base, data_dir, tokens, folder=folder)
    if "POLICY_FILE" in env:
        Path(env["POLICY_FILE"]).write_text(DEMO_POLICY, encoding="utf-8")
    return command, env, data_dir


async def start_bot(
    base: str, data_dir: Path, tokens: tuple[str, str]
) -> asyncio.subprocess.Process:
    command, env, cwd = bot_command(base, data_dir, tokens)
    return await asyncio.create_subprocess_exec(*command, env=env, cwd=cwd)
