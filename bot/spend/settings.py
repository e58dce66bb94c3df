"""`MODEL_PRICES`: the operator's prices, checked when the settings are read (an invalid file
stops the start with the settings' one clear message, like every other setting)."""

from __future__ import annotations

from pathlib import Path

from pydantic import field_validator
from pydantic_settings import BaseSettings

from bot.spend.prices import Prices


class SpendSettings(BaseSettings):
    # A YAML or JSON file `{MODEL: {input, cached_input, output}}` (USD per million tokens),
    # merged over the prices shipped for common models (bot/spend/default_prices.yaml).
    model_prices: Path | None = None

    @field_validator("model_prices")
    @classmethod
    def _prices_valid(cls, v: Path | None) -> Path | None:
        Prices.load(v)  # a ValueError names the file and the entry
        return v

    def load_prices(self) -> Prices:
        return Prices.load(self.model_prices)
