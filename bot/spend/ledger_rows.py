"""The ledger's rows: which budgets apply, the window rows locked in one order, and a budget's
standing built from its row.

Locking: every writer locks `spend_windows` rows in budget-name order (a reservation's own row
first, where it has one), so two calls never wait on each other in a circle. On PostgreSQL
that is `SELECT … FOR UPDATE`; on SQLite every write transaction already holds the database's
write lock from its start (`BEGIN IMMEDIATE`, bot/db/session.py), so the same statements are
serialised there without it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import ColumnElement, Select, and_, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.db.models import SpendRaise, SpendWindow
from bot.spend.budget_model import Budget
from bot.spend.standing import Asker, Standing, nano_of
from bot.spend.windows import WindowAt

HELD, SETTLED, RELEASED = "held", "settled", "released"


@dataclass
class WindowRow:
    """A `spend_windows` row as read (plain values: the ledger writes with single UPDATE
    statements, never through the session's copies)."""

    id: int
    budget: str
    window_key: str
    used_nano: int
    reserved_nano: int
    used_tokens: int
    reserved_tokens: int
    raised_nano: int
    raised_tokens: int
    soft_noticed_at: datetime | None
    leased_nano: int = 0  # room processes hold as leases (bot/spend/leases.py)
    leased_tokens: int = 0
    reclaim: int = 0  # bumped when a call is refused while leases hold room
    raised_to_nano: int | None = None  # an approved "raise to" for this window (see `limits`)
    raised_to_tokens: int | None = None


@dataclass
class Claimed:
    """A reservation just moved out of `held`: what it held, where."""

    holds: list[dict[str, Any]]
    estimate_nano: int
    estimate_tokens: int


_COLUMNS = [getattr(SpendWindow, name) for name in WindowRow.__dataclass_fields__]


def _insert_of(dialect: str) -> Any:
    """The dialect's INSERT with ON CONFLICT, imported when first used: a SQLite start never
    loads the PostgreSQL dialect (tests/test_start_imports.py)."""
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert


def _select() -> Select[Any]:
    return select(*_COLUMNS)


def _rows(result: Iterable[Any]) -> list[WindowRow]:
    return [WindowRow(*row) for row in result]


def applies(budget: Budget, asker: Asker) -> bool:
    """Whether `budget` counts a call made for `asker`."""
    scope = budget.scope
    kind, value = scope.kind, scope.value
    if kind in ("workspace", "per_turn"):
        return True
    if kind == "channel":
        return value == asker.channel_id
    if kind == "user":
        return value == asker.user_id
    if kind == "group":
        return value in asker.groups
    return value in asker.packs  # pack


def limits(budget: Budget, row: WindowRow | None) -> tuple[int | None, int | None]:
    """The hard limits in force: the policy's value read now (plus what `raise_limit` added),
    or the amount a raise approved for this window, whichever is higher. An approved "to $24"
    is what the window has however the file changes: a reload to $30 gives $30 (not $42),
    a reload to $6 leaves the approved $24."""
    raised_nano = row.raised_nano if row else 0
    raised_tokens = row.raised_tokens if row else 0
    to_nano = (row.raised_to_nano if row else None) or 0
    to_tokens = (row.raised_to_tokens if row else None) or 0
    money = None if budget.usd is None else max(nano_of(budget.usd) + raised_nano, to_nano)
    tokens = None if budget.tokens is None else max(budget.tokens + raised_tokens, to_tokens)
    return money, tokens


def free(budget: Budget, row: WindowRow) -> tuple[int | None, int | None]:
    """The room nobody holds, in nano-dollars and tokens (None: no such limit): the limits
    less what was used, what calls hold and what processes hold as leases."""
    money_limit, token_limit = limits(budget, row)
    money = None if money_limit is None else money_limit - row.used_nano - row.reserved_nano
    tokens = None if token_limit is None else token_limit - row.used_tokens - row.reserved_tokens
    return (
        None if money is None else money - row.leased_nano,
        None if tokens is None else tokens - row.leased_tokens,
    )


def has_room(budget: Budget, row: WindowRow, nano: int, tokens: int) -> bool:
    """Used + held + leased + this call stay within every hard limit."""
    money, more = free(budget, row)
    return (money is None or nano <= money) and (more is None or tokens <= more)


def past_soft(budget: Budget, row: WindowRow) -> bool:
    """The window's use reached the budget's soft fraction of a limit."""
    if budget.soft is None:
        return False
    fraction = Decimal(str(budget.soft))
    money_limit, token_limit = limits(budget, row)
    money = money_limit is not None and row.used_nano >= fraction * money_limit
    tokens = token_limit is not None and row.used_tokens >= fraction * token_limit
    return money or tokens


def standing_of(budget: Budget, at: WindowAt, row: WindowRow | None) -> Standing:
    money_limit, token_limit = limits(budget, row)
    return Standing(
        name=budget.name,
        scope_kind=budget.scope.kind,
        scope_value=budget.scope.value,
        window=budget.window,
        window_key=at.key,
        used_nano=row.used_nano if row else 0,
        reserved_nano=row.reserved_nano if row else 0,
        limit_nano=money_limit,
        used_tokens=row.used_tokens if row else 0,
        reserved_tokens=row.reserved_tokens if row else 0,
        limit_tokens=token_limit,
        resets_at=at.resets_at,
        timezone=at.timezone,
        owners=tuple(budget.owners),
        fallback_model=budget.fallback_model,
        soft=budget.soft,
    )


def _matching(keys: Iterable[tuple[str, str]]) -> ColumnElement[bool]:
    return or_(*(and_(SpendWindow.budget == b, SpendWindow.window_key == k) for b, k in keys))


async def read_rows(
    session: AsyncSession, keys: list[tuple[str, str]]
) -> dict[tuple[str, str], WindowRow]:
    """The window rows that exist for (budget, window key) pairs, unlocked."""
    if not keys:
        return {}
    found = _rows(await session.execute(_select().where(_matching(keys))))
    return {(row.budget, row.window_key): row for row in found}


async def create_rows(session: AsyncSession, keys: list[tuple[str, str]], now: datetime) -> None:
    """Insert the missing window rows, in name order; a row another call inserts meanwhile
    is left as it is (ON CONFLICT DO NOTHING on both backends)."""
    dialect = session.get_bind().dialect.name
    insert = _insert_of(dialect)
    values = [
        {
            "budget": budget,
            "window_key": key,
            "used_nano": 0,
            "reserved_nano": 0,
            "used_tokens": 0,
            "reserved_tokens": 0,
            "raised_nano": 0,
            "raised_tokens": 0,
            "leased_nano": 0,
            "leased_tokens": 0,
            "reclaim": 0,
            "version": 1,
            "created_at": now,
        }
        for budget, key in sorted(keys)
    ]
    statement = insert(SpendWindow).values(values)
    await session.execute(statement.on_conflict_do_nothing(index_elements=["budget", "window_key"]))


async def lock_rows(
    session: AsyncSession, keys: list[tuple[str, str]], ids: Iterable[int] = ()
) -> dict[tuple[str, str], WindowRow]:
    """The window rows for `keys` (and those of `ids`), locked in budget-name order."""
    wanted = [_matching(keys)] if keys else []
    ids = list(ids)
    if ids:
        wanted.append(SpendWindow.id.in_(ids))
    found = _rows(
        await session.execute(
            _select()
            .where(or_(*wanted))
            .order_by(SpendWindow.budget, SpendWindow.window_key)
            .with_for_update()
        )
    )
    return {(row.budget, row.window_key): row for row in found}


def _increments(reserved_nano: int, reserved_tokens: int, more: dict[str, int]) -> dict[str, Any]:
    values: dict[str, Any] = {
        "reserved_nano": SpendWindow.reserved_nano + reserved_nano,
        "reserved_tokens": SpendWindow.reserved_tokens + reserved_tokens,
        "version": SpendWindow.version + 1,
    }
    return values | {name: getattr(SpendWindow, name) + amount for name, amount in more.items()}


async def add_to(
    session: AsyncSession,
    ids: list[int],
    reserved_nano: int,
    reserved_tokens: int,
    **more: int,
) -> None:
    """Add to the holds (and `more`: used_nano, used_tokens, raised_nano, raised_tokens) of
    window rows already locked: one statement for all of them."""
    await session.execute(
        update(SpendWindow)
        .where(SpendWindow.id.in_(ids))
        .values(_increments(reserved_nano, reserved_tokens, more))
        .execution_options(synchronize_session=False)
    )


async def set_raised_to(
    session: AsyncSession, row_id: int, nano: int | None, tokens: int | None
) -> None:
    """Set an approved "raise to" on a window row already locked (None: that limit unchanged)."""
    values = {"raised_to_nano": nano, "raised_to_tokens": tokens}
    await session.execute(
        update(SpendWindow)
        .where(SpendWindow.id == row_id)
        .values({k: v for k, v in values.items() if v is not None})
        .execution_options(synchronize_session=False)
    )


async def record_raise(
    session: AsyncSession,
    key: str,
    budget: str,
    window_key: str,
    nano: int,
    tokens: int,
    now: datetime,
) -> bool:
    """Record an approved raise under its idempotency key; False if that key was recorded
    before (ON CONFLICT DO NOTHING: two replicas applying one approval add it once)."""
    dialect = session.get_bind().dialect.name
    insert = _insert_of(dialect)
    statement = (
        insert(SpendRaise)
        .values(
            key=key, budget=budget, window_key=window_key, nano=nano, tokens=tokens, created_at=now
        )
        .on_conflict_do_nothing(index_elements=["key"])
        .returning(SpendRaise.id)
    )
    return (await session.execute(statement)).first() is not None
