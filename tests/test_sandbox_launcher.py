"""The sandbox's bot starts from an allow-listed environment, away from `.env`: a real GitHub
token, MCP servers, Redis, a policy file or policy, a real Slack's settings, in the environment
or in the `.env` of the folder the sandbox starts in, never reach it; it gets the sandbox's
own tokens (with this start's key), and a real model only when one is set."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bot.config import Settings
from bot.tools.integration_settings import IntegrationSettings
from sandbox.launcher import POLICY, bot_command

REAL = {
    "GITHUB_TOKEN": "ghp_real",
    "GITHUB_REPOS": "acme/*",
    "LINEAR_API_KEY": "lin_real",
    "MCP_SERVERS": '{"mcpServers": {"wiki": {"url": "https://mcp.example/"}}}',
    "REDIS_URL": "redis://prod:6379/0",
    "POLICY_FILE": "policy.yaml",  # the one in the folder the sandbox starts in
    "APPROVAL_POLICIES": '{"*": {"approvers": ["U0REAL"]}}',
    "SLACK_BOT_TOKEN": "xoxb-real",
    "SLACK_SIGNING_SECRET": "real-secret",
    "DATABASE_URL": "postgresql://prod/countersign",
    "METRICS_PORT": "9100",
    "PUBLIC_BASE_URL": "https://countersign.example/",
    "TOOL_PACKS": "bot.tools.packs.tasks",
}
TOKENS = ("xoxb-k3y", "xapp-k3y")


def read_by_the_bot(
    child: dict[str, str], cwd: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, object]:
    """The bot's settings as it reads them: from exactly `child` as its environment and the
    `.env` (if any) of `cwd`, its working folder."""
    for name in list(os.environ):
        monkeypatch.delenv(name)
    for name, value in child.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(cwd)
    s, i = Settings(), IntegrationSettings()
    return {
        "bot_token": s.slack_bot_token.get_secret_value(),
        "app_token": s.slack_app_token.get_secret_value() if s.slack_app_token else None,
        "redis": s.redis_url,
        "policy_file": s.policy_file,
        "policies": s.approval_policies,
        "database": s.database_url,
        "metrics": s.metrics_port,
        "model": s.llm_model,
        "model_url": str(s.openai_base_url),
        "packs": s.tool_packs,
        "github": bool(i.github_token),
        "linear": bool(i.linear_api_key),
        "mcp": list(i.mcp_servers),
    }


def test_no_real_setting_reaches_the_sandboxs_bot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, data = tmp_path / "here", tmp_path / "data"
    folder.mkdir()
    data.mkdir()
    (folder / ".env").write_text("".join(f"{k}={v}\n" for k, v in REAL.items()))
    (folder / "policy.yaml").write_text("version: 1\nrules: []\n")
    for name, value in REAL.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("STREAMING", "edit")  # how it talks may pass
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(folder)
    command, child, cwd = bot_command("http://127.0.0.1:3999", data, TOKENS, folder=folder)
    assert (command[1:], cwd) == (["-m", "bot", "run"], data)  # it runs in its data folder
    replaced = {"SLACK_BOT_TOKEN", "DATABASE_URL", "APPROVAL_POLICIES", "POLICY_FILE"}  # own
    assert not (set(REAL) - replaced) & set(child)
    assert all(child[name] != REAL[name] for name in replaced)
    assert child["STREAMING"] == "edit"
    seen = read_by_the_bot(child, cwd, monkeypatch)
    assert seen == {
        "bot_token": "xoxb-k3y",
        "app_token": "xapp-k3y",
        "redis": None,
        "policy_file": data / "policy.yaml",  # the sandbox's demo budget
        "policies": POLICY,
        "database": f"sqlite:///{data / 'countersign.db'}",
        "metrics": None,
        "model": "countersign-demo",
        "model_url": "http://127.0.0.1:3999/demo-model/v1",
        "packs": ["bot.tools.packs.tasks", "bot.tools.packs.slack"],  # the default
        "github": False,
        "linear": False,
        "mcp": [],
    }
    # The test has teeth: run in the sandbox's folder, the bot would read its .env.
    leaky = read_by_the_bot(child, folder, monkeypatch)
    assert leaky["redis"] == REAL["REDIS_URL"]


def test_a_real_model_in_dotenv_is_the_one_thing_borrowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "LLM_MODEL", *REAL):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / ".env").write_text(
        "OPENAI_API_KEY=sk-mine\nOPENAI_BASE_URL=http://127.0.0.1:11434/v1\nLLM_MODEL=llama3\n"
        "GITHUB_TOKEN=ghp_real\nREDIS_URL=redis://prod:6379/0\n"
    )
    _, child, _ = bot_command("http://127.0.0.1:3999", tmp_path, TOKENS, folder=tmp_path)
    assert (child["OPENAI_API_KEY"], child["LLM_MODEL"]) == ("sk-mine", "llama3")
    assert "GITHUB_TOKEN" not in child
    assert "REDIS_URL" not in child
