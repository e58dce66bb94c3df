"""Settings of the outside tools the assistant can act in: GitHub, Linear and MCP servers.

Each integration is off until its credential is set (`GITHUB_TOKEN`, `LINEAR_API_KEY`,
`MCP_SERVERS`); its base URL can point at GitHub Enterprise or a local fake.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import Field, HttpUrl, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode

from bot.tools.mcp.config import McpServerConfig, read_mcp_servers

_REPO = re.compile(r"^[A-Za-z0-9_.-]+/([A-Za-z0-9_.-]+|\*)$")


class IntegrationSettings(BaseSettings):
    github_token: SecretStr | None = None
    github_api_url: HttpUrl = HttpUrl("https://api.github.com")
    github_repos: Annotated[list[str], NoDecode] = Field(default_factory=list)
    linear_api_key: SecretStr | None = None
    linear_api_url: HttpUrl = HttpUrl("https://api.linear.app/graphql")
    mcp_servers: Annotated[dict[str, McpServerConfig], NoDecode] = Field(default_factory=dict)
    mcp_check_seconds: Annotated[float, Field(ge=0.05, le=600)] = 15.0

    @field_validator("github_token", "linear_api_key")
    @classmethod
    def _blank_is_off(cls, v: SecretStr | None) -> SecretStr | None:
        return v if v is not None and v.get_secret_value().strip() else None

    @field_validator("github_repos", mode="before")
    @classmethod
    def _repos(cls, v: Any) -> Any:
        if isinstance(v, str):
            v = [p.strip() for p in v.split(",") if p.strip()]
        if isinstance(v, list):
            bad = [r for r in v if not isinstance(r, str) or not _REPO.match(r)]
            if bad:
                raise ValueError(f"{bad[0]!r} is not owner/repo or owner/*")
            return [r.lower() for r in v]
        return v

    @field_validator("mcp_servers", mode="before")
    @classmethod
    def _mcp(cls, v: Any) -> Any:
        if isinstance(v, str) or (isinstance(v, dict) and "mcpServers" in v):
            return read_mcp_servers(v)
        return v

    def integration_secrets(self) -> list[str]:
        values = [s.get_secret_value() for s in (self.github_token, self.linear_api_key) if s]
        for server in self.mcp_servers.values():
            values += server.secrets()
        return values
