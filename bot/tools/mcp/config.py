"""`MCP_SERVERS`: the `{"mcpServers": {NAME: {...}}}` file teams already keep for other MCP
clients, plus Countersign's gating keys per server.

A server is either `{"command", "args", "env", "cwd"}` (stdio: started and stopped with the
bot) or `{"url", "headers"}` (Streamable HTTP). `${VAR}` in `env`, `headers` or `url` is read
from the bot's environment, so tokens stay out of the file. Every value that came from `env` or
`headers`, and every value a `${VAR}` brought in (a token in a URL's query, say), counts as a
secret: logs redact it.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StringConstraints,
    model_validator,
)

ServerName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{1,32}$")]
# A server's name is its pack's name in APPROVAL_POLICIES: it may not borrow a built-in pack's.
RESERVED = frozenset({"tasks", "slack", "github", "linear"})
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class McpServerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # Other clients' files often say which transport; it must agree with command/url.
    type: Literal["stdio", "http", "streamable-http", "streamable_http"] | None = None
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict, repr=False)  # may hold tokens
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict, repr=False)  # may hold tokens
    # Countersign's gating: every tool is a write (a card) unless named here, or the server is
    # trusted and the tool says readOnlyHint: true.
    read_only_tools: list[str] = Field(default_factory=list)
    trust_annotations: bool = False
    destructive_tools: list[str] = Field(default_factory=list)
    allowed_tools: list[str] | None = None  # None: all; otherwise only these are offered
    timeout_seconds: Annotated[float, Field(gt=0, le=600)] = 30.0
    # What `${VAR}`s expanded to: secrets wherever they went (url, env, headers).
    _expanded: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError('give either "command" (stdio) or "url" (Streamable HTTP)')
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError('"url" must start with http:// or https://')
        if self.type == "stdio" and self.command is None:
            raise ValueError('"type" is stdio but there is no "command"')
        if self.type not in (None, "stdio") and self.url is None:
            raise ValueError(f'"type" is {self.type} but there is no "url"')
        return self

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"

    def secrets(self) -> list[str]:
        """Values to redact from logs: each env and header value, and a header's credential
        alone (the part after `Bearer `)."""
        values = [*self.env.values(), *self.headers.values(), *self._expanded]
        values += [v.split()[-1] for v in self.headers.values() if " " in v.strip()]
        return [v for v in values if len(v) >= 4]


class McpServersFile(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    mcp_servers: dict[ServerName, McpServerConfig] = Field(alias="mcpServers")


def _expand(value: str, where: str, found: list[str]) -> str:
    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise ValueError(f"{where} uses ${{{name}}}, which is not set in the environment")
        found.append(os.environ[name])
        return os.environ[name]

    return _VARIABLE.sub(one, value)


def _expanded(raw: dict[str, Any], found: dict[str, list[str]]) -> dict[str, Any]:
    """`raw` with every `${VAR}` replaced; `found[server]` gets the values brought in."""
    servers = raw.get("mcpServers")
    if not isinstance(servers, dict):
        return raw
    out: dict[str, Any] = {}
    for name, server in servers.items():
        if not isinstance(server, dict):
            out[name] = server
            continue
        server = dict(server)
        values = found.setdefault(str(name), [])
        for key in ("env", "headers"):
            if isinstance(server.get(key), dict):
                server[key] = {
                    k: _expand(v, f"{name}.{key}.{k}", values) if isinstance(v, str) else v
                    for k, v in server[key].items()
                }
        if isinstance(server.get("url"), str):
            server["url"] = _expand(server["url"], f"{name}.url", values)
        out[name] = server
    return {**raw, "mcpServers": out}


def read_mcp_servers(value: str | dict[str, Any] | None) -> dict[str, McpServerConfig]:
    """Inline JSON, a path to a JSON file, or an already parsed mapping; `ValueError` with a
    plain message when it is none of these or does not fit."""
    if value is None or value == "" or value == {}:
        return {}
    raw: Any = value
    if isinstance(value, str):
        text = value.strip()
        if not text.startswith("{"):
            path = Path(text).expanduser()
            try:
                text = path.read_text(encoding="utf-8")
            except OSError as exc:
                raise ValueError(f"cannot read the file {path} ({exc.strerror})") from None
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not valid JSON ({exc.msg} at character {exc.pos})") from None
    if not isinstance(raw, dict):
        raise ValueError('must be a JSON object {"mcpServers": {...}}')
    found: dict[str, list[str]] = {}
    servers = McpServersFile.model_validate(_expanded(raw, found)).mcp_servers
    for name, server in servers.items():
        server._expanded = tuple(found.get(name, ()))
    for name in servers:  # NAME__TOOL must split back into the server's name
        if "__" in name or name.endswith("_"):
            raise ValueError(f"{name!r}: a server's name may not contain '__' or end with '_'")
    taken = sorted(RESERVED & {name.lower() for name in servers})
    if taken:
        raise ValueError(
            f"{taken[0]!r} is a built-in pack's name (approval policies would be shared); "
            "give the server another name"
        )
    return servers
