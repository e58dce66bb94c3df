"""A spend ledger on a real database, with budgets that can be reloaded and a clock that can
be moved: shared by the ledger's tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.db import repositories as repo
from bot.db.models import Role
from bot.db.session import Database
from bot.spend.budget_model import Budget
from bot.spend.ledger import Spend
from bot.spend.prices import Prices
from bot.spend.standing import Asker, Refused, Reservation, Standing

ALICE = Asker(
    team_id="T0TEAM",
    channel_id="C0SUPPORT",
    user_id="U0ALICE",
    groups=frozenset({"S0ENG"}),
    packs=frozenset({"github"}),
    turn_key="turn-1",
)
MODEL = "gpt-4o-mini"  # $0.15 in, $0.60 out per million tokens
# On it, 1,000 prompt tokens and 1,000 reply tokens cost $0.00075 (750,000 nano).
CALL = 750_000


def budget(name: str, **values: Any) -> Budget:
    values.setdefault("scope", {"workspace": True})
    values.setdefault("window", "day")
    return Budget.model_validate({"name": name, **values})


@dataclass
class Policy:
    """What the policy file holds now: `budgets` and `timezone` can change mid-test."""

    budgets: list[Budget] = field(default_factory=list)
    timezone: str = "UTC"

    def __call__(self) -> tuple[list[Budget], str]:
        return self.budgets, self.timezone


@dataclass
class Clock:
    at: datetime = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.at

    def advance(self, **delta: float) -> None:
        self.at += timedelta(**delta)


OPEN: list[Spend] = []  # closed by `close_all` before their databases are disposed


def spend_on(db: Any, policy: Policy, clock: Clock | None = None) -> Spend:
    spend = Spend(db, policy, Prices.load(None), now=clock or Clock())
    OPEN.append(spend)
    return spend


async def close_all() -> None:
    """Shut the ledgers made here down, as the bot does (their flushers stop)."""
    while OPEN:
        await OPEN.pop().close()


async def hold(
    spend: Spend, model: str = MODEL, asker: Asker = ALICE, size: int = 1000
) -> Reservation:
    """A call of `size` prompt and `size` reply tokens that must get its hold."""
    got = await spend.reserve(asker, model, size, size)
    assert isinstance(got, Reservation), got
    return got


async def refusal(spend: Spend, model: str = MODEL, asker: Asker = ALICE) -> Refused:
    got = await spend.reserve(asker, model, 1000, 1000)
    assert isinstance(got, Refused), got
    return got


async def standing(spend: Spend, name: str) -> Standing:
    found = await spend.standing(name)
    assert found is not None
    return found


async def eighty_turns(db: Database) -> int:
    """A conversation of 80 turns, long enough that a prompt must summarise the older ones;
    its id."""
    async with db.transaction() as session:
        conversation, _ = await repo.get_or_create_conversation(session, "T", "C", "1.0", "UA")
        for turn in range(80):
            said = f"turn {turn}: remember {turn * 7} " + "and more words " * 10
            await repo.add_message(session, conversation, Role.USER, said, slack_user="UA")
            await repo.add_message(session, conversation, Role.ASSISTANT, f"noted {turn}")
        return conversation.id
