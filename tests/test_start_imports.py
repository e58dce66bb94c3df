"""Start fast (issue 28): what the configuration does not use is not imported.

The bot is prepared as `countersign run` prepares it (the command line, the settings, the
app and its runtime, every long-lived object built) in a fresh interpreter, and its imports are
read from `sys.modules`: the MCP SDK only with an MCP server configured (jsonschema only once
an MCP tool's schema is checked), a tool pack's client only with its pack (GitHub's brings
httpx), celpy only with a policy condition, Alembic only with a schema to migrate (its
migrations bring PostgreSQL's dialect, which a SQLite start otherwise does without).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bot.db.migrate import alembic_config, head_revisions
from tests.fakes import openai as fake_openai
from tests.fakes import slack as fake_slack
from tests.harness import clean_env
from tests.mcp_helpers import stdio_server

ROOT = Path(__file__).resolve().parent.parent
WATCHED = {
    "mcp": "mcp",
    "mcp_types": "mcp_types",
    "github": "bot.tools.packs.github.client",
    "linear": "bot.tools.packs.linear.client",
    "celpy": "celpy",
    "jsonschema": "jsonschema",
    "httpx": "httpx",
    "postgresql": "sqlalchemy.dialects.postgresql",
    "alembic": "alembic",
    "pypdf": "pypdf",
    "PIL": "PIL",
    "playwright": "playwright",
    "sandbox": "sandbox",
}
PREPARE = """
import asyncio, json, sys
from bot.__main__ import _parser
from bot.config import load_settings
_parser().parse_args(["run"])
settings = load_settings()
from bot.app import Countersign
import bot.server

async def prepare():
    countersign = Countersign.build(settings)
    if "migrate" in sys.argv:
        from bot.db.migrate import upgrade_to_head
        await upgrade_to_head(countersign.db)
    await countersign.db.dispose()

asyncio.run(prepare())
watched = json.loads(sys.argv[1])
print(json.dumps({name: module in sys.modules for name, module in watched.items()}))
"""


def imported(
    tmp_path: Path, settings: dict[str, str] | None = None, *, migrate: bool = False
) -> set[str]:
    """Which of WATCHED a fresh bot process has imported once prepared with `settings`."""
    env = clean_env(
        SLACK_BOT_TOKEN=fake_slack.BOT_TOKEN,
        SLACK_APP_TOKEN=fake_slack.APP_TOKEN,
        OPENAI_API_KEY=fake_openai.API_KEY,
        DATABASE_URL=f"sqlite:///{tmp_path / 'bot.db'}",
        **(settings or {}),
    )
    done = subprocess.run(
        [sys.executable, "-c", PREPARE, json.dumps(WATCHED), *(["migrate"] if migrate else [])],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, bool] = json.loads(done.stdout.strip().splitlines()[-1])
    return {name for name, present in found.items() if present}


def test_the_newcomers_start_imports_no_sdk_it_does_not_use(tmp_path: Path) -> None:
    assert imported(tmp_path) == set()


@pytest.mark.parametrize(
    ("configured", "expected"),
    [
        ("mcp", {"mcp", "mcp_types"}),
        ("packs", {"github", "linear", "httpx"}),
        ("policy", {"celpy"}),
    ],
)
def test_what_is_configured_is_imported_and_nothing_else(
    tmp_path: Path, configured: str, expected: set[str]
) -> None:
    settings: dict[str, str] = {
        "mcp": {
            "MCP_SERVERS": json.dumps({"mcpServers": {"notes": stdio_server(tmp_path / "log")}})
        },
        "packs": {"GITHUB_TOKEN": "ghp-test", "LINEAR_API_KEY": "lin-test"},
        "policy": {"POLICY_FILE": str(ROOT / "examples" / "policy.yaml")},  # `when` conditions
    }[configured]
    assert imported(tmp_path, settings) == expected


def test_alembic_is_imported_to_migrate_and_not_to_find_the_schema_at_head(
    tmp_path: Path,
) -> None:
    migrating = {"alembic", "postgresql"}  # the migrations name PostgreSQL's types
    assert imported(tmp_path, migrate=True) == migrating  # a new database: migrated
    assert imported(tmp_path, migrate=True) == set()  # the same one, at head


def test_the_head_read_from_the_migration_files_is_alembics() -> None:
    from alembic.script import ScriptDirectory

    assert head_revisions() == set(ScriptDirectory.from_config(alembic_config()).get_heads())
