"""`linear`: issues in Linear, on when `LINEAR_API_KEY` is set. Reads run at once; every write
is a card (see `writes`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from bot.tools.integration_settings import IntegrationSettings
from bot.tools.packs.linear.client import LinearClient
from bot.tools.packs.linear.reads import read_tools
from bot.tools.packs.linear.writes import write_tools
from bot.tools.registry import Tool

PACK = "linear"


class LinearPack:
    def __init__(self, client: LinearClient) -> None:
        self.client = client

    @classmethod
    def from_settings(cls, settings: IntegrationSettings) -> LinearPack:
        assert settings.linear_api_key is not None
        return cls(
            LinearClient(settings.linear_api_key.get_secret_value(), str(settings.linear_api_url))
        )

    def tools(self) -> list[Tool[Any]]:
        return [
            replace(t, pack=PACK) for t in [*read_tools(self.client), *write_tools(self.client)]
        ]

    async def close(self) -> None:
        await self.client.close()
