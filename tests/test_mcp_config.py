"""`MCP_SERVERS` read as teams write it, with clear errors; tool names the model's API accepts;
`doctor` naming each server and what it offers."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.config import SettingsError, load_settings
from bot.doctor_integrations import check_mcp
from bot.logs import configure
from bot.tools.integration_settings import IntegrationSettings
from bot.tools.mcp.tools import exposed_name
from tests.mcp_helpers import free_port, stdio_server

BASE = {"slack_bot_token": "xoxb-1", "openai_api_key": "sk-1", "_env_file": None}


def problems(mcp_servers: object) -> str:
    with pytest.raises(SettingsError) as caught:
        load_settings(**BASE, mcp_servers=mcp_servers)
    return caught.value.render()


def test_the_common_file_shape_inline_or_as_a_path(tmp_path: Path) -> None:
    text = (
        '{"mcpServers": {"docs": {"command": "npx", "args": ["-y", "srv"]}, "web": {"url": '
        '"https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer s3cr3t-token"}}}}'
    )
    inline = load_settings(**BASE, mcp_servers=text).mcp_servers
    path = tmp_path / "mcp.json"
    path.write_text(text)
    assert load_settings(**BASE, mcp_servers=str(path)).mcp_servers == inline
    assert inline["docs"].transport == "stdio"
    assert inline["web"].transport == "http"


def test_secrets_come_from_the_environment_and_are_redacted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DOCS_TOKEN", "tok-1234567890")
    settings = load_settings(
        **BASE,
        mcp_servers='{"mcpServers": {"web": {"url": "https://x.example/mcp", '
        '"headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}}}}',
    )
    assert settings.mcp_servers["web"].headers["Authorization"] == "Bearer tok-1234567890"
    assert "tok-1234567890" in settings.secret_values()
    monkeypatch.delenv("DOCS_TOKEN")
    message = problems(
        '{"mcpServers": {"web": {"url": "https://x.example/mcp", '
        '"headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}}}}'
    )
    assert "web.headers.Authorization uses ${DOCS_TOKEN}, which is not set" in message


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("{not json", "MCP_SERVERS is invalid (not valid JSON"),
        ("/nowhere/mcp.json", "cannot read the file /nowhere/mcp.json"),
        ('{"servers": {}}', "mcpServers: Field required"),
        ('{"mcpServers": {"a": {}}}', 'give either "command" (stdio) or "url"'),
        ('{"mcpServers": {"a": {"command": "x", "url": "http://y"}}}', 'give either "command"'),
        ('{"mcpServers": {"a b": {"command": "x"}}}', "String should match pattern"),
        ('{"mcpServers": {"a": {"url": "ftp://y"}}}', '"url" must start with http'),
        ('{"mcpServers": {"a": {"command": "x", "read_only": ["t"]}}}', "read_only: Extra"),
        ('{"mcpServers": {"a": {"type": "stdio", "url": "http://y"}}}', '"type" is stdio'),
        ('{"mcpServers": {"GitHub": {"command": "x"}}}', "'github' is a built-in pack's name"),
        ('{"mcpServers": {"a__b": {"command": "x"}}}', "may not contain '__' or end with '_'"),
    ],
)
def test_a_bad_mcp_servers_value_says_what_is_wrong(value: str, expected: str) -> None:
    message = problems(value)
    assert expected in message, message
    assert "MCP_SERVERS" in message


@given(st.text(min_size=1, max_size=200), st.text(min_size=1, max_size=200))
def test_exposed_names_fit_the_api_and_never_collide(first: str, second: str) -> None:
    names = {exposed_name("a_long-server_name_of_32_chars__", t) for t in (first, second)}
    for name in names:
        assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name)
        assert name.startswith("a_long-server_name_of_32_chars____")
    assert len(names) == (1 if first == second else 2)
    assert exposed_name("gh", "create_issue") == "gh__create_issue"


async def test_doctor_names_each_server_whether_it_answered_and_its_tools(
    tmp_path: Path,
) -> None:
    settings = IntegrationSettings(
        _env_file=None,
        mcp_servers={
            "mcpServers": {
                "notes": stdio_server(tmp_path / "n.jsonl", read_only_tools=["list_notes"]),
                "away": {"url": f"http://127.0.0.1:{free_port()}/mcp"},
                "missing": {"command": "/nonexistent/bin/mcp-server"},
            }
        },
    )
    lines = {c.name: c for c in await check_mcp(settings)}
    cost = lines["mcp tools"]
    assert cost.ok
    assert cost.detail.startswith("10 tool schema(s) take about ")
    notes, away = lines["mcp notes (stdio)"], lines["mcp away (http)"]
    assert notes.ok
    assert "10 tool(s): 1 run at once (read-only), 9 need approval" in notes.detail
    assert not away.ok
    assert "did not answer: it could not be reached (ConnectError)" in away.detail
    assert "check its url, headers and that it is running" in away.detail
    missing = lines["mcp missing (stdio)"]
    assert not missing.ok
    assert "did not answer: its command was not found" in missing.detail


def test_the_example_file_in_examples_is_valid(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_MCP_TOKEN", "ghp_example_000000")
    example = Path(__file__).resolve().parent.parent / "examples" / "mcp_servers.json"
    servers = load_settings(**BASE, mcp_servers=str(example)).mcp_servers
    assert sorted(servers) == ["deepwiki", "files", "github_mcp"]
    assert servers["files"].transport == "stdio"
    assert servers["github_mcp"].headers["Authorization"] == "Bearer ghp_example_000000"


def test_a_tool_with_an_invalid_schema_is_not_offered_and_requests_stay_within_128_tools(
    tmp_path: Path,
) -> None:
    import mcp_types as types

    from bot.tools.catalog import ToolRegistry
    from bot.tools.mcp.hub import McpHub

    servers = IntegrationSettings(
        _env_file=None, mcp_servers={"mcpServers": {"s": stdio_server(tmp_path / "x.jsonl")}}
    ).mcp_servers
    hub = McpHub(servers)
    connection = hub.connections["s"]
    connection.definitions = [
        types.Tool(name="bad", input_schema={"type": "object", "properties": {"x": {"type": 5}}}),
        *(types.Tool(name=f"t{i}", input_schema={"type": "object"}) for i in range(150)),
    ]
    (status,) = hub.status()
    assert status.tools == 150  # "bad" left out: its schema would make the API refuse
    connection._client = object()  # type: ignore[assignment]  # up, as far as offering goes
    registry = ToolRegistry.from_packs(["bot.tools.packs.tasks"])
    registry.add_source(hub)
    schemas = registry.schemas()
    assert len(schemas) == 128
    assert schemas[0]["function"]["name"] == "list_tasks"  # built-in tools come first


async def test_an_http_server_behind_a_token_gets_it_from_headers_and_a_wrong_one_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.mcp_helpers import HttpNotes

    notes = await HttpNotes(tmp_path / "h.jsonl").start(token="s3cret-notes-token")
    try:
        monkeypatch.setenv("NOTES_MCP_TOKEN", "s3cret-notes-token")
        good = {"url": notes.url, "headers": {"Authorization": "Bearer ${NOTES_MCP_TOKEN}"}}
        bad = {"url": notes.url, "headers": {"Authorization": "Bearer wrong-token-123"}}
        settings = IntegrationSettings(
            _env_file=None, mcp_servers={"mcpServers": {"good": good, "bad": bad}}
        )
        checks = {c.name: c for c in await check_mcp(settings)}
    finally:
        notes.kill()
    assert checks["mcp good (http)"].ok
    assert not checks["mcp bad (http)"].ok
    assert "401" in checks["mcp bad (http)"].detail
    assert "wrong-token" not in checks["mcp bad (http)"].detail


def test_integration_credentials_are_redacted_by_value_in_logs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every credential the settings hold, including what `${VAR}`s brought into a URL and a
    5-character env value, is logged through the bot's logging set-up: none comes out."""
    monkeypatch.setenv("DOCS_TEAM", "team-7c1f0a")
    monkeypatch.setenv("DOCS_PIN", "p9Q2x")
    servers = {
        "mcpServers": {
            "s": {"command": "x", "env": {"API_KEY": "mcp-env-secret", "PIN": "${DOCS_PIN}"}},
            "docs": {"url": "https://mcp.example.com/mcp?team=${DOCS_TEAM}"},
        }
    }
    settings = load_settings(
        **BASE,
        github_token="ghp_secret_value_123456",
        linear_api_key="lin_api_secret_value_123456",
        mcp_servers=servers,
    )
    secrets = [
        "ghp_secret_value_123456",
        "lin_api_secret_value_123456",
        "mcp-env-secret",
        "p9Q2x",
        "team-7c1f0a",
    ]
    assert "ghp_secret_value_123456" not in repr(settings)
    assert "mcp-env-secret" not in repr(settings)
    try:
        configure("INFO", settings.secret_values())
        log = logging.getLogger("countersign.test")
        for secret in secrets:
            log.warning("calling with %s.", secret)
        log.warning("connecting to %s", settings.mcp_servers["docs"].url)
    finally:
        logging.getLogger().handlers.clear()
    out = capsys.readouterr().err
    assert out.count("[redacted]") == len(secrets) + 1
    for secret in secrets:
        assert secret not in out, secret
    assert "https://mcp.example.com/mcp?team=[redacted]" in out


def test_doctor_fails_when_tool_schemas_would_crowd_out_the_conversation() -> None:
    from bot.doctor_integrations import schema_cost

    settings = load_settings(**BASE, token_budget=1_000, reply_tokens=100)
    big = [
        {
            "type": "function",
            "function": {
                "name": f"t{i}",
                "description": "word " * 40,
                "parameters": {"type": "object"},
            },
        }
        for i in range(20)
    ]
    check = schema_cost(settings, big)
    assert not check.ok
    assert "raise TOKEN_BUDGET or narrow the servers with allowed_tools" in check.detail
