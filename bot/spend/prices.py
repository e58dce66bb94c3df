"""Model prices, USD per million tokens (`MODEL_PRICES` merged over the shipped defaults).

CONTRACT (the implementation is being built)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path


@dataclass(frozen=True)
class Price:
    input: Decimal
    output: Decimal
    cached_input: Decimal | None = None


class Prices:
    def __init__(self, prices: dict[str, Price]) -> None:
        self.prices = prices

    @classmethod
    def load(cls, path: Path | None) -> Prices:
        """The shipped defaults with `path`'s entries (YAML or JSON) over them; a clear
        `ValueError` naming the file and the entry when it is invalid."""
        raise NotImplementedError

    def of(self, model: str) -> Price | None:
        return self.prices.get(model)

    def nano(self, model: str, prompt: int, completion: int, cached: int = 0) -> int:
        """What the tokens cost in nano-dollars; 0 for a model without a price."""
        raise NotImplementedError
