"""Model prices, USD per million tokens (`MODEL_PRICES` merged over the shipped defaults).

The defaults ship inside the package (`default_prices.yaml`, read with importlib.resources so
an installed wheel finds them); each entry of the operator's file replaces the default of the
same model whole."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from decimal import Decimal
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

DEFAULTS = "default_prices.yaml"
# USD per million tokens -> nano-dollars per token: x 1e9 / 1e6.
_NANO_PER_TOKEN = Decimal(1000)


@dataclass(frozen=True)
class Price:
    input: Decimal
    output: Decimal
    cached_input: Decimal | None = None


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input: Decimal = Field(ge=0, le=100_000)
    output: Decimal = Field(ge=0, le=100_000)
    cached_input: Decimal | None = Field(None, ge=0, le=100_000)


def _exact(value: Any) -> Any:
    """YAML reads 0.15 as a float: take its shortest text, so 0.15 stays 0.15 exactly."""
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, dict):
        return {k: _exact(v) for k, v in value.items()}
    return value


def parse(text: str, source: str, as_json: bool = False) -> dict[str, Price]:
    """`{MODEL: {input, cached_input, output}}`, or a `ValueError` naming `source`, the model
    and what is wrong with it."""
    try:
        raw = json.loads(text) if as_json else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        kind = "JSON" if as_json else "YAML"
        raise ValueError(f"{source} is not valid {kind} ({str(exc).splitlines()[0]})") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ValueError(
            f"{source} must map model names to {{input, cached_input, output}} "
            "(USD per million tokens)"
        )
    prices: dict[str, Price] = {}
    for model, entry in raw.items():
        try:
            valid = _Entry.model_validate(_exact(entry))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            detail = f"{where}: {first['msg']}" if where else first["msg"]
            raise ValueError(f"{source}: {model}: {detail}") from None
        prices[str(model)] = Price(valid.input, valid.output, valid.cached_input)
    return prices


class Prices:
    def __init__(self, prices: dict[str, Price]) -> None:
        self.prices = prices

    @classmethod
    def defaults(cls) -> Prices:
        text = resources.files("bot.spend").joinpath(DEFAULTS).read_text(encoding="utf-8")
        return cls(parse(text, DEFAULTS))

    @classmethod
    def load(cls, path: Path | None) -> Prices:
        """The shipped defaults with `path`'s entries (YAML or JSON) over them; a clear
        `ValueError` naming the file and the entry when it is invalid."""
        prices = cls.defaults().prices
        if path is None:
            return cls(prices)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"cannot read {path} ({exc.strerror})") from None
        except UnicodeDecodeError:
            raise ValueError(f"{path} is not a text file") from None
        return cls(prices | parse(text, str(path), as_json=path.suffix.lower() == ".json"))

    def of(self, model: str) -> Price | None:
        return self.prices.get(model)

    def nano(self, model: str, prompt: int, completion: int, cached: int = 0) -> int:
        """What the tokens cost in nano-dollars; 0 for a model without a price. `prompt`
        counts the cached tokens too (as the server reports them); a fraction of a
        nano-dollar is rounded up, so spend is never under-counted."""
        price = self.prices.get(model)
        if price is None:
            return 0
        cached = min(max(cached, 0), prompt)
        cached_rate = price.input if price.cached_input is None else price.cached_input
        usd_millionths = (
            (prompt - cached) * price.input + cached * cached_rate + completion * price.output
        )
        return math.ceil(usd_millionths * _NANO_PER_TOKEN)
