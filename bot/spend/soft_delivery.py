"""What the ledger's writes tell outside it once they committed: the soft thresholds crossed
(owners get one notice per window) and the spend metrics of each charge."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from bot import metrics
from bot.spend.standing import SoftCrossing, usd_of

log = logging.getLogger(__name__)


class SoftDelivery:
    """Soft notices, sent beside whoever found them (a call's path does not wait), to
    `on_soft` (the wiring's owner notices); one that fails is logged, the others still go."""

    def __init__(self) -> None:
        self.on_soft: Callable[[SoftCrossing], Awaitable[None]] | None = None
        self._sending: set[asyncio.Task[None]] = set()

    def deliver(self, crossings: list[SoftCrossing]) -> None:
        if crossings and self.on_soft is not None:
            task = asyncio.get_running_loop().create_task(self.send_all(crossings))
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)

    async def send_all(self, crossings: list[SoftCrossing]) -> None:
        for crossing in crossings:
            if self.on_soft is None:
                continue
            try:
                await self.on_soft(crossing)
            except Exception as exc:
                log.warning("soft notice of %s failed: %s", crossing.standing.name, exc)


def count(scopes: tuple[str, ...], state: str, nano: int, tokens: int) -> None:
    """Metrics of a charge that committed."""
    for scope in scopes:
        metrics.SPEND_RESERVATIONS.labels(scope, state).inc()
        metrics.SPEND_USD.labels(scope).inc(float(usd_of(nano)))
        metrics.SPEND_TOKENS.labels(scope).inc(tokens)
