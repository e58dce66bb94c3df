"""A dict that never grows past a size: every cache the bot keeps in memory is one, so neither a
busy workspace nor a tool server that keeps changing can grow the process without end."""

from __future__ import annotations

from collections import OrderedDict
from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


class BoundedCache(OrderedDict[K, V]):
    """At most `limit` entries; adding one more forgets the least recently added or read."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def __getitem__(self, key: K) -> V:
        value = super().__getitem__(key)
        self.move_to_end(key)
        return value

    def __setitem__(self, key: K, value: V) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.limit:
            self.popitem(last=False)
