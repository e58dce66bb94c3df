"""The ledger's writes for many model calls at once: one transaction, a few statements.

Every reservation locks the window rows of the budgets it counts in, so when 50 turns start
together against one workspace budget, 50 transactions used to queue on that one row, each a
few statements and a commit (bench/budgets.py: reserve p99 ~350 ms). Here the holds and the
charges that arrive while a transaction is in flight meet in the next one
(`bot.db.group_commit`): the reservations they charge are claimed in one UPDATE, the union of
their window rows is locked once, in name order, each call is decided in arrival order against
the rows as the calls before it left them, the new holds are one INSERT and each window row
one UPDATE. All or none per call, never past a limit, charged once: as one call at a time.

Leases (bot/spend/leases.py) ride in the same batches: a `Flush` writes what a process did
in memory (calls taken from its leases, room given back, renewals); a hold first gives back
its process's own lease room on its windows (counted as free), and once decided is granted a
lease (bot/spend/ledger_leases.py); a hold refused while other processes' leases hold room
bumps the window's reclaim generation and says so (`Held.retry`).

This runs inside `GroupCommit`: a batch that fails is rolled back and done again one call at a
time, so it only touches the database; metrics are counted by the caller once it committed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    String,
    Table,
    case,
    insert,
    literal,
    update,
)
from sqlalchemy.ext.asyncio import AsyncSession

from bot.db.group_commit import Together
from bot.db.models import SpendReservation
from bot.db.models.base import UTCDateTime
from bot.spend import ledger_rows as rows
from bot.spend.ledger_calls import NOT_HELD, Charge, Charged, Flush, Flushed, Held, Hold
from bot.spend.ledger_leases import own_leases
from bot.spend.ledger_windows import Windows, update_rows
from bot.spend.standing import SoftCrossing

RESERVATIONS: Table = SpendReservation.__table__  # type: ignore[assignment]


def _by_id(
    charges: Sequence[Charge], value: Any, type_: Any, column: ColumnElement[Any] | None = None
) -> ColumnElement[Any]:
    """`value(charge)` for each charge's row (typed: PostgreSQL casts every parameter);
    `column` where it is None and one is given."""
    whens: dict[int, ColumnElement[Any]] = {}
    for c in charges:
        got = value(c)
        whens[c.reservation_id] = (
            column if got is None and column is not None else literal(got, type_)
        )
    return case(whens, value=RESERVATIONS.c.id)


async def _claim(session: AsyncSession, charges: Sequence[Charge]) -> dict[int, rows.Claimed]:
    """Move every held reservation of `charges` out of `held` in one UPDATE (compare-and-set
    on the state); what each held. A reservation not held any more is left out."""
    first = list({c.reservation_id: c for c in reversed(charges)}.values())
    if not first:
        return {}
    table = RESERVATIONS
    found = await session.execute(
        update(table)
        .where(table.c.id.in_([c.reservation_id for c in first]), table.c.state == rows.HELD)
        .values(
            state=_by_id(first, lambda c: c.state, String()),
            settled_at=_by_id(first, lambda c: c.now, UTCDateTime()),
            prompt_tokens=_by_id(first, lambda c: c.used and c.used.prompt, BigInteger()),
            completion_tokens=_by_id(first, lambda c: c.used and c.used.completion, BigInteger()),
            charged_nano=_by_id(
                first, lambda c: c.used and c.nano, BigInteger(), table.c.estimate_nano
            ),
            charged_from=_by_id(first, lambda c: c.charged_from, String()),
        )
        .returning(table.c.id, table.c.holds, table.c.estimate_nano, table.c.estimate_tokens)
    )
    return {int(row[0]): rows.Claimed(*row[1:]) for row in found}


async def _lock(
    session: AsyncSession, keys: list[tuple[str, str]], ids: list[int], now: datetime
) -> dict[tuple[str, str], rows.WindowRow]:
    """The window rows named by (budget, window key) or id, locked in name order; rows of a
    window's first call are created first (then all locked again, in name order: on PostgreSQL
    those already locked stay so, and the rest can only wait on calls locking in that order)."""
    locked = await rows.lock_rows(session, keys, ids)
    missing = [key for key in keys if key not in locked]
    if missing:
        await rows.create_rows(session, missing, now)
        locked = await rows.lock_rows(session, keys, ids)
    return locked


def _decide(hold: Hold, windows: Windows) -> tuple[Held, list[dict[str, Any]]]:
    """Room in every budget (a budget's own fallback model always has room): the holds taken;
    else the standing of the first budget without room, and nothing taken. Refused while
    other processes' leases hold room there: they are asked to give it back (`retry`)."""
    if hold.probe:  # nothing to hold: only a lease to size
        return Held(None, None), []
    found = [windows.by_key[key] for key in hold.keys]
    for budget, at, row in zip(hold.budgets, hold.windows, found, strict=True):
        if not hold.spared_by(budget) and not rows.has_room(budget, row, hold.nano, hold.tokens):
            leased = row.leased_nano > 0 or row.leased_tokens > 0
            if leased:
                windows.bump(row)
            return Held(None, rows.standing_of(budget, at, row), retry=leased), []
    for row in found:
        windows.add(row, hold.nano, hold.tokens, used=False)
    return Held(None, None), [
        {"window": row.id, "budget": b.name, "scope": b.scope.kind}
        for row, b in zip(found, hold.budgets, strict=True)
    ]


def _charge(charge: Charge, claimed: rows.Claimed, windows: Windows) -> Charged:
    """Swap the hold for the charge in each window it held; take each soft notice this
    charge brings due (the rows are locked: none was taken by anyone else)."""
    nano = charge.nano if charge.used is not None else claimed.estimate_nano
    tokens = charge.used.total if charge.used is not None else claimed.estimate_tokens
    by_name = {b.name: b for b in charge.budgets}
    crossings: list[SoftCrossing] = []
    for hold in claimed.holds:
        row = windows.by_id.get(int(hold["window"]))
        if row is None:
            continue
        windows.add(row, -claimed.estimate_nano, -claimed.estimate_tokens, used=False)
        windows.add(row, nano, tokens, used=True)
        crossing = windows.notice(row, by_name.get(row.budget), charge.timezone, charge.now)
        if crossing is not None:
            crossings.append(crossing)
    scopes = tuple(str(hold["scope"]) for hold in claimed.holds)
    return Charged(scopes, nano, tokens, tuple(crossings))


Call = Hold | Charge | Flush
Result = Held | Charged | Flushed


async def write(session: AsyncSession, calls: Sequence[Call]) -> list[Result]:
    """Decide and write a batch of holds, charges and flushes, in their order."""
    charges = [c for c in calls if isinstance(c, Charge)]
    holds = [h for h in calls if isinstance(h, Hold)]
    flushes = [f for f in calls if isinstance(f, Flush)]
    claimed = await _claim(session, charges)
    keys = sorted({key for h in holds for key in h.keys})
    ids = {int(w["window"]) for c in claimed.values() for w in c.holds}
    ids |= {w for f in flushes for w in f.window_ids} | {w for h in holds for w, _, _ in h.returned}
    now = max(call.now for call in calls)
    windows = Windows(await _lock(session, keys, sorted(ids), now) if keys or ids else {})
    leases = await own_leases(session, calls, set(windows.by_id))
    results: list[Result] = []
    new: list[tuple[int, Hold, list[dict[str, Any]]]] = []
    written: list[tuple[int, list[dict[str, Any]]]] = []
    for call in calls:
        if isinstance(call, Charge):
            won = claimed.pop(call.reservation_id, None)  # a second charge of one: not held
            results.append(NOT_HELD if won is None else _charge(call, won, windows))
        elif isinstance(call, Flush):
            by_name = {b.name: b for b in call.budgets}
            values, charged, crossings = leases.flush(call, windows, by_name)
            results.append(Flushed((), tuple(charged), tuple(crossings)))
            written.append((len(results) - 1, values))
        else:
            leases.give_back(call, windows)
            held, taken = _decide(call, windows)
            results.append(held)
            if held.refused is None and call.lease:
                leases.grant(call, len(results) - 1, windows)
            if held.refused is None and not call.probe:
                new.append((len(results) - 1, call, taken))
    if new:
        inserted = await session.execute(
            insert(RESERVATIONS).returning(RESERVATIONS.c.id, sort_by_parameter_order=True),
            [
                {
                    "model": h.model,
                    "state": rows.HELD,
                    "team_id": h.asker.team_id,
                    "user_id": h.asker.user_id,
                    "turn_key": h.asker.turn_key,
                    "holds": taken,
                    "estimate_nano": h.nano,
                    "estimate_tokens": h.tokens,
                    "created_at": h.now,
                }
                for _, h, taken in new
            ],
        )
        for (index, _, _), reservation_id in zip(new, inserted.scalars(), strict=True):
            decided = results[index]
            assert isinstance(decided, Held)
            results[index] = replace(decided, id=int(reservation_id))
    for index, values in written:
        if values:
            inserted = await session.execute(
                insert(RESERVATIONS).returning(RESERVATIONS.c.id, sort_by_parameter_order=True),
                values,
            )
            flushed = results[index]
            assert isinstance(flushed, Flushed)
            results[index] = replace(flushed, ids=tuple(int(i) for i in inserted.scalars()))
    for index, grants in leases.handed().items():
        granted = results[index]
        assert isinstance(granted, Held)
        granted.grants.update(grants)
    await leases.write(session, now)
    await update_rows(session, windows, now)
    return results


LEDGER = Together[Call, Result]("spend ledger", write)
