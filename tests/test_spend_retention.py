"""Spend records of windows that ended are forgotten; those of current windows and calls
still in flight stay."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from sqlalchemy import func, select, update

from bot.db.migrate import upgrade_to_head
from bot.db.models import SpendRaise, SpendReservation, SpendWindow, utcnow
from bot.db.session import Database
from bot.records.retention import SPEND_KEEP, purge_spend


async def test_ended_windows_and_settled_calls_go_held_calls_and_current_windows_stay(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'spend.db'}"
    db = Database.from_url(url)
    await upgrade_to_head(db)
    old = utcnow() - SPEND_KEEP - timedelta(days=1)
    try:
        async with db.transaction() as session:
            for created, key in ((old, "2026-09"), (utcnow(), "2026-11")):
                session.add(SpendWindow(budget="team", window_key=key, created_at=created))
                session.add(SpendRaise(key=f"raise-{key}", budget="team", window_key=key))
            for state in ("settled", "released", "held"):
                session.add(
                    SpendReservation(
                        model="m",
                        state=state,
                        team_id="T1",
                        user_id="U1",
                        turn_key="t",
                        holds=[],
                        estimate_nano=1,
                        estimate_tokens=1,
                        created_at=old,
                    )
                )
            session.add(
                SpendReservation(
                    model="m",
                    state="settled",
                    team_id="T1",
                    user_id="U1",
                    turn_key="t",
                    holds=[],
                    estimate_nano=1,
                    estimate_tokens=1,
                )
            )
        async with db.transaction() as session:
            await session.execute(
                update(SpendRaise).where(SpendRaise.window_key == "2026-09").values(created_at=old)
            )

        assert await purge_spend(db) == 2

        async with db.reading() as session:
            windows = (await session.scalars(select(SpendWindow.window_key))).all()
            raises = (await session.scalars(select(SpendRaise.window_key))).all()
            states = sorted((await session.scalars(select(SpendReservation.state))).all())
            assert await session.scalar(select(func.count()).select_from(SpendWindow)) == 1
        assert windows == ["2026-11"]
        assert raises == ["2026-11"]
        assert states == ["held", "settled"]  # the call in flight, and this month's
    finally:
        await db.dispose()
