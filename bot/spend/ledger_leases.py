"""Leases in a ledger batch (bot/spend/ledger_batch.py): a process's own lease room given
back and counted as free, leases granted after a call is decided, calls taken from leases in
memory written behind (`Flush`), and the `spend_leases` rows written once for the batch.

Every change is an increment, under the window rows' locks, so used + reserved + leased only
grows by what a decided call holds: a lease is granted only from room nobody holds. A call
written behind moves its estimate from the lease to the window's holds (or, settled already,
to what was used); room given back leaves the lease and the window's leased room alike. A
lease the sweeper charged (its holder seemed dead) is gone: a call written later from it is
not counted again in that window (the whole lease was charged)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Table, bindparam, delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.db.models import SpendLease, SpendWindow
from bot.spend import ledger_rows as rows
from bot.spend.budget_model import Budget
from bot.spend.ledger_calls import Flush, Grant, Hold
from bot.spend.ledger_windows import Windows
from bot.spend.standing import SoftCrossing

LEASES: Table = SpendLease.__table__  # type: ignore[assignment]
CAP = 16  # a lease holds at most this many calls' estimates: what a crash may over-count


def size(budget: Budget, row: rows.WindowRow, nano: int, tokens: int) -> tuple[int, int] | None:
    """The lease to grant on `row` for calls of this estimate: what is free (the holder's
    own lease given back already), halved when other processes hold leases there (so a
    second replica finds room without asking), at most CAP estimates; None if it would not
    hold one call. A dimension the budget does not limit is not leased (0)."""
    money, more = rows.free(budget, row)
    grant_nano = grant_tokens = 0
    if money is not None:
        grant_nano = min(money // (2 if row.leased_nano > 0 else 1), CAP * nano)
        if grant_nano < max(nano, 1):
            return None
    if more is not None:
        grant_tokens = min(more // (2 if row.leased_tokens > 0 else 1), CAP * tokens)
        if grant_tokens < max(tokens, 1):
            return None
    return grant_nano, grant_tokens


class Leases:
    """The batch's leases: which exist (holder, window id), what leaves them, what is granted."""

    def __init__(self, own: set[tuple[str, int]]) -> None:
        self.own = own
        self.taken: dict[tuple[str, int], list[int]] = {}
        self.granted: dict[tuple[str, int], tuple[Grant, int, tuple[str, str]]] = {}

    def leave(self, holder: str, row: rows.WindowRow, nano: int, tokens: int, w: Windows) -> bool:
        """Take room out of `holder`'s lease on `row` (False: it has none, nothing moved)."""
        if (holder, row.id) not in self.own:
            return False
        taken = self.taken.setdefault((holder, row.id), [0, 0])
        taken[0] += nano
        taken[1] += tokens
        w.lease(row, -nano, -tokens)
        return True

    def give_back(self, hold: Hold, w: Windows) -> None:
        """Before `hold` is decided: its holder's lease room on its windows is free."""
        for window_id, nano, tokens in hold.returned:
            row = w.by_id.get(window_id)
            if row is not None and nano | tokens:
                self.leave(hold.holder, row, nano, tokens, w)
        for key in hold.keys:
            row = w.by_key[key]
            earlier = self.granted.pop((hold.holder, row.id), None)
            if earlier is not None:  # granted earlier in this batch, not handed out yet
                w.lease(row, -earlier[0].nano, -earlier[0].tokens)

    def grant(self, hold: Hold, index: int, w: Windows) -> None:
        """After `hold` got its room (or for a probe): a lease on each calendar window."""
        for budget, key in zip(hold.budgets, hold.keys, strict=True):
            row = w.by_key[key]
            sized = None if budget.window == "turn" else size(budget, row, hold.nano, hold.tokens)
            if sized is not None:
                w.lease(row, *sized)
                grant = Grant(row.id, sized[0], sized[1], row.reclaim)
                self.granted[(hold.holder, row.id)] = (grant, index, key)

    def flush(
        self, flush: Flush, w: Windows, by_name: dict[str, Budget]
    ) -> tuple[list[dict[str, Any]], list[tuple[tuple[str, ...], int, int]], list[SoftCrossing]]:
        """The rows of the calls `flush` writes behind, what each settled one was charged,
        and the soft notices they bring due; their estimates leave the leases."""
        values, charged, crossings = [], [], []
        for ticket, settled in flush.tickets:
            kept = {
                window_id
                for window_id, nano, tokens in ticket.took
                if window_id in w.by_id
                and self.leave(flush.holder, w.by_id[window_id], nano, tokens, w)
            }
            holds = [h for h in ticket.holds if int(h["window"]) in kept]
            used = ticket.used if settled else None
            for hold in holds:
                row = w.by_id[int(hold["window"])]
                if used is None:
                    w.add(row, ticket.nano, ticket.tokens, used=False)
                    continue
                w.add(row, ticket.charged_nano, used.total, used=True)
                budget = by_name.get(row.budget)
                crossing = w.notice(row, budget, flush.timezone, flush.now)
                if crossing is not None:
                    crossings.append(crossing)
            if used is not None:
                scopes = tuple(str(h["scope"]) for h in holds)
                charged.append((scopes, ticket.charged_nano, used.total))
            values.append(
                {
                    "model": ticket.model,
                    "state": rows.HELD if used is None else rows.SETTLED,
                    "team_id": ticket.asker.team_id,
                    "user_id": ticket.asker.user_id,
                    "turn_key": ticket.asker.turn_key,
                    "holds": holds,
                    "estimate_nano": ticket.nano,
                    "estimate_tokens": ticket.tokens,
                    "created_at": ticket.created_at,
                    "settled_at": None if used is None else flush.now,
                    "prompt_tokens": None if used is None else used.prompt,
                    "completion_tokens": None if used is None else used.completion,
                    "charged_nano": None if used is None else ticket.charged_nano,
                    "charged_from": None if used is None else ticket.charged_from,
                }
            )
        for window_id, nano, tokens in flush.returned:
            back = w.by_id.get(window_id)
            if back is not None:
                self.leave(flush.holder, back, nano, tokens, w)
        for window_id in flush.renew:
            if (flush.holder, window_id) in self.own:
                self.taken.setdefault((flush.holder, window_id), [0, 0])
        return values, charged, crossings

    def handed(self) -> dict[int, dict[tuple[str, str], Grant]]:
        """The grants to hand out, by the index of the hold that gets them."""
        found: dict[int, dict[tuple[str, str], Grant]] = {}
        for grant, index, key in self.granted.values():
            found.setdefault(index, {})[key] = grant
        return found

    async def write(self, session: AsyncSession, now: datetime) -> None:
        """The lease rows: what left each (and its renewal), then the grants (added)."""
        table = LEASES
        if self.taken:
            await session.execute(
                update(table)
                .where(table.c.holder == bindparam("h"), table.c.window_id == bindparam("w"))
                .values(
                    room_nano=table.c.room_nano - bindparam("n"),
                    room_tokens=table.c.room_tokens - bindparam("t"),
                    renewed_at=bindparam("now"),
                ),
                [
                    {"h": h, "w": w, "n": n, "t": t, "now": now}
                    for (h, w), (n, t) in sorted(self.taken.items())
                ],
            )
        for (holder, window_id), (grant, _, _) in sorted(self.granted.items()):
            if (holder, window_id) in self.own:
                await session.execute(
                    update(table)
                    .where(table.c.holder == holder, table.c.window_id == window_id)
                    .values(
                        room_nano=table.c.room_nano + grant.nano,
                        room_tokens=table.c.room_tokens + grant.tokens,
                        renewed_at=now,
                    )
                )
                continue
            await session.execute(
                LEASES.insert().values(
                    window_id=window_id,
                    holder=holder,
                    room_nano=grant.nano,
                    room_tokens=grant.tokens,
                    renewed_at=now,
                    created_at=now,
                )
            )


async def own_leases(session: AsyncSession, calls: Sequence[Any], ids: set[int]) -> Leases:
    """The leases the batch's holders have on its windows (none asked: no query)."""
    holders = {c.holder for c in calls if isinstance(c, Hold | Flush) and c.holder}
    if not holders or not ids:
        return Leases(set())
    found = await session.execute(
        select(LEASES.c.holder, LEASES.c.window_id).where(
            LEASES.c.holder.in_(sorted(holders)),
            LEASES.c.window_id.in_(sorted(ids)),
        )
    )
    return Leases({(str(h), int(w)) for h, w in found})


async def charge_lapsed(
    lease_id: int, window_id: int, cutoff: datetime, session: AsyncSession
) -> bool:
    """A lease its holder stopped renewing before `cutoff` (it died): its whole room charged
    as used (what it took in memory and never wrote is unknown: never under-count), the lease
    gone. False if it was renewed or charged meanwhile."""
    locked = await rows.lock_rows(session, [], [window_id])
    found = (
        await session.execute(
            select(LEASES.c.room_nano, LEASES.c.room_tokens).where(
                LEASES.c.id == lease_id, LEASES.c.renewed_at < cutoff
            )
        )
    ).first()
    if found is None:
        return False
    nano, tokens = int(found[0]), int(found[1])
    if locked:
        await session.execute(
            update(SpendWindow)
            .where(SpendWindow.id == window_id)
            .values(
                used_nano=SpendWindow.used_nano + nano,
                used_tokens=SpendWindow.used_tokens + tokens,
                leased_nano=SpendWindow.leased_nano - nano,
                leased_tokens=SpendWindow.leased_tokens - tokens,
                version=SpendWindow.version + 1,
            )
        )
    await session.execute(delete(LEASES).where(LEASES.c.id == lease_id))
    return True
