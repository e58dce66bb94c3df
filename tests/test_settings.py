"""Settings: defaults, validation, and the one clear message (exit 2, no traceback)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config import SettingsError, load_settings
from bot.db.session import async_url
from tests.harness import clean_env, run_cli

BASE = {"SLACK_BOT_TOKEN": "xoxb-1", "OPENAI_API_KEY": "sk-x"}


def test_missing_and_invalid_settings_are_all_named_with_exit_2(tmp_path: Path) -> None:
    # `python -m bot` started afresh, as a user's shell would: the one CLI test that does not
    # fork a warm interpreter (tests/cli_process.py).
    result = run_cli(
        ["run"],
        clean_env(
            **{
                "SLACK_BOT_TOKEN": "xoxp-user-token",
                "DATABASE_URL": "mysql://db/x",
                "LLM_TIMEOUT_SECONDS": "-3",
                "SLACK_API_URL": "not a url",
            }
        ),
        tmp_path,
        exec_python=True,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    err = result.stderr
    assert "SLACK_BOT_TOKEN is invalid (must start with xoxb-)" in err
    assert "OPENAI_API_KEY is missing" in err
    assert "DATABASE_URL is invalid" in err
    assert "LLM_TIMEOUT_SECONDS is invalid" in err
    assert "SLACK_API_URL is invalid" in err
    assert "xoxp-user-token" not in err  # secrets are never echoed


def test_http_mode_without_signing_secret_is_refused(tmp_path: Path) -> None:
    result = run_cli(["serve", "--port", "0"], clean_env(**BASE), tmp_path)
    assert result.returncode == 2
    assert "SLACK_SIGNING_SECRET is missing" in result.stderr
    assert "Traceback" not in result.stderr


def test_dotenv_file_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".env").write_text(
        "SLACK_BOT_TOKEN=xoxb-from-file\nOPENAI_API_KEY=k\nHISTORY_WINDOW_MESSAGES=12\n"
    )
    monkeypatch.chdir(tmp_path)
    settings = load_settings()
    assert settings.slack_bot_token.get_secret_value() == "xoxb-from-file"
    assert settings.history_window_messages == 12
    assert settings.slack_edit_budget_per_minute == 50
    assert not settings.socket_mode


def test_system_prompt_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Be brief.")
    for k, v in BASE.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("SYSTEM_PROMPT_FILE", str(prompt))
    assert load_settings().system_prompt == "Be brief."
    monkeypatch.setenv("SYSTEM_PROMPT_FILE", str(tmp_path / "missing.txt"))
    with pytest.raises(SettingsError) as caught:
        load_settings()
    assert "SYSTEM_PROMPT_FILE: cannot read" in caught.value.render()


@pytest.mark.parametrize(
    ("pasted", "driver"),
    [
        ("sqlite:///countersign.db", "sqlite+aiosqlite"),
        ("postgres://u:p@h:5432/db", "postgresql+asyncpg"),
        ("postgresql://u:p@h/db", "postgresql+asyncpg"),
        ("postgresql+psycopg://u@h/db", "postgresql+asyncpg"),
    ],
)
def test_database_urls_work_as_users_paste_them(pasted: str, driver: str) -> None:
    assert async_url(pasted).drivername == driver


def test_tokens_are_redacted_from_logs(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from bot.logs import RedactingFilter

    record = logging.LogRecord(
        "x",
        logging.INFO,
        __file__,
        1,
        "token %s and %s and %s",
        ("xoxb-1234-abcd", "xapp-1-A1-xyz", "sk-abcdefghijkl"),
        None,
    )
    assert RedactingFilter().filter(record)
    message = record.getMessage()
    for secret in ("xoxb-1234-abcd", "xapp-1-A1-xyz", "sk-abcdefghijkl"):
        assert secret not in message
    assert "[redacted]" in message
