"""`countersign doctor` for the outside tools: `GET /user` for GitHub, `viewer` for Linear and
`tools/list` for each MCP server, each problem said in plain words (never a credential)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from bot.conversation.tokens import TokenCounter
from bot.doctor_checks import TIMEOUT_SECONDS, Check
from bot.tools.integration_settings import IntegrationSettings
from bot.tools.mcp.hub import McpHub


async def check_mcp(settings: IntegrationSettings) -> list[Check]:
    if not settings.mcp_servers:
        return [Check("mcp", True, "no MCP_SERVERS configured")]
    hub = McpHub(settings.mcp_servers)
    try:
        await hub.start(wait=TIMEOUT_SECONDS)
        rows = hub.status()
        schemas = [tool.schema() for tool in hub.offered()]
    finally:
        await hub.close()
    checks = [] if not schemas else [schema_cost(settings, schemas)]
    for row in rows:
        name = f"mcp {row.name} ({row.transport})"
        if row.up:
            detail = (
                f"answered in {row.connect_seconds or 0:.1f} s; {row.tools} tool(s): "
                f"{row.reads} run at once (read-only), {row.writes} need approval"
            )
            checks.append(Check(name, True, detail))
        else:
            hint = (
                "check its command and args (run it by hand to see its error)"
                if row.transport == "stdio"
                else "check its url, headers and that it is running"
            )
            checks.append(Check(name, False, f"did not answer: {row.error}; {hint}."))
    return checks


async def check_linear(settings: IntegrationSettings) -> list[Check]:
    if settings.linear_api_key is None:
        return [Check("linear", True, "off (LINEAR_API_KEY is not set)")]
    from bot.tools.packs.linear.client import LinearClient
    from bot.tools.registry import ToolError

    client = LinearClient(
        settings.linear_api_key.get_secret_value(),
        str(settings.linear_api_url),
        timeout=TIMEOUT_SECONDS,
    )
    try:
        viewer = (await client.run("Viewer", "asking for the viewer"))["viewer"]
    except ToolError as exc:
        hint = " Check LINEAR_API_URL and the network." if "reached" in str(exc) else ""
        return [Check("linear", False, f"the viewer query failed: {str(exc).rstrip('.')}.{hint}")]
    finally:
        await client.close()
    return [Check("linear", True, f"authenticated as {viewer.get('name')}")]


def schema_cost(settings: IntegrationSettings, schemas: list[dict[str, Any]]) -> Check:
    """The MCP tools' schemas go with every request to the model: say what they cost, and fail
    when they would leave too little of `TOKEN_BUDGET` for the conversation."""
    model = str(getattr(settings, "llm_model", "gpt-4o-mini"))
    budget = int(getattr(settings, "token_budget", 16_000)) - int(
        getattr(settings, "reply_tokens", 2_000)
    )
    tokens = TokenCounter(model).text(json.dumps(schemas, sort_keys=True))
    detail = f"{len(schemas)} tool schema(s) take about {tokens} tokens of every request"
    if tokens > budget // 2:
        return Check(
            "mcp tools",
            False,
            f"{detail}, more than half of what TOKEN_BUDGET leaves ({budget}): raise "
            "TOKEN_BUDGET or narrow the servers with allowed_tools.",
        )
    return Check("mcp tools", True, f"{detail} (budget left for the conversation: {budget})")


async def check_github(settings: IntegrationSettings) -> list[Check]:
    if settings.github_token is None:
        return [Check("github", True, "off (GITHUB_TOKEN is not set)")]
    from bot.tools.packs.github.client import GitHubClient
    from bot.tools.registry import ToolError

    client = GitHubClient(
        settings.github_token.get_secret_value(),
        str(settings.github_api_url),
        settings.github_repos,
        timeout=TIMEOUT_SECONDS,
    )
    try:
        login = await client.login()
    except ToolError as exc:
        hint = " Check GITHUB_API_URL and the network." if "reached" in str(exc) else ""
        return [Check("github", False, f"GET /user failed: {str(exc).rstrip('.')}.{hint}")]
    finally:
        await client.close()
    scope = ", ".join(settings.github_repos) or "every repository the token can reach"
    return [Check("github", True, f"authenticated as {login}; repositories: {scope}")]


async def integration_checks(settings: IntegrationSettings) -> list[Check]:
    found = await asyncio.gather(
        check_github(settings), check_linear(settings), check_mcp(settings)
    )
    return [check for checks in found for check in checks]
