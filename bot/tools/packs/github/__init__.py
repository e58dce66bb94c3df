"""`github`: issues and pull requests in the repositories `GITHUB_REPOS` allows, on when
`GITHUB_TOKEN` is set. Reads run at once; every write is a card (see `writes`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from bot.tools.integration_settings import IntegrationSettings
from bot.tools.packs.github.client import GitHubClient
from bot.tools.packs.github.pulls import pull_tools
from bot.tools.packs.github.reads import read_tools
from bot.tools.packs.github.writes import write_tools
from bot.tools.registry import Tool

PACK = "github"


class GitHubPack:
    def __init__(self, client: GitHubClient) -> None:
        self.client = client

    @classmethod
    def from_settings(cls, settings: IntegrationSettings) -> GitHubPack:
        assert settings.github_token is not None
        return cls(
            GitHubClient(
                settings.github_token.get_secret_value(),
                str(settings.github_api_url),
                settings.github_repos,
            )
        )

    def tools(self) -> list[Tool[Any]]:
        return [
            replace(t, pack=PACK)
            for t in [
                *read_tools(self.client),
                *write_tools(self.client),
                *pull_tools(self.client),
            ]
        ]

    async def close(self) -> None:
        await self.client.close()
