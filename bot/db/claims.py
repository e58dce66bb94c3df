"""Claiming Slack deliveries, with group commit.

A delivery (event id, channel+ts) must be recorded before the placeholder is posted, so that a
retry or the `app_mention`/`message.channels` pair never gets a second reply. When twenty
events arrive at once, twenty one-row transactions queue behind SQLite's single writer; here
the claims that arrive while one transaction is in flight are written together by the next one,
a single `INSERT … ON CONFLICT DO NOTHING RETURNING key`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from bot.db import repositories as repo
from bot.db.session import Database


class DeliveryClaims:
    def __init__(self, db: Database) -> None:
        self.db = db
        self._pending: list[tuple[list[str], asyncio.Future[bool]]] = []
        self._writer: asyncio.Task[None] | None = None

    async def claim(self, keys: Sequence[str]) -> bool:
        """True for the first claim of all of these keys; False if any was claimed before."""
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._pending.append((list(keys), future))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write(), name="delivery-claims")
        return await future

    async def _write(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            try:
                async with self.db.transaction() as session:
                    inserted = await repo.record_new_keys(
                        session, [k for keys, _ in batch for k in keys]
                    )
            except Exception as exc:  # every waiter learns of the failure
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for (_, future), won in zip(
                batch, winners([k for k, _ in batch], inserted), strict=True
            ):
                if not future.done():
                    future.set_result(won)


def winners(claims: Sequence[Sequence[str]], inserted: set[str]) -> list[bool]:
    """Which claims, in arrival order, won: all of their keys among those the batch's insert
    recorded, and none taken by an earlier claim of the batch (`inserted` is used up)."""
    won: list[bool] = []
    for keys in claims:
        won.append(all(k in inserted for k in keys))
        inserted.difference_update(keys)  # a later claim in this batch loses them
    return won
