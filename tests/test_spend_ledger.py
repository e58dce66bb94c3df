"""The spend ledger on real SQLite files and the real PostgreSQL: which budgets a call counts
in, all-or-none holds, settling, raises, soft notices, stale holds, and many calls at once on
two replicas never passing a limit."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from bot.db.session import Database
from bot.policy.source import PolicySource
from bot.spend.ledger import Spend
from bot.spend.prices import Prices
from bot.spend.standing import Reservation, SoftCrossing, Tokens
from tests.spend_helpers import (
    ALICE,
    CALL,
    MODEL,
    Clock,
    Policy,
    budget,
    close_all,
    hold,
    refusal,
    spend_on,
    standing,
)


@pytest.fixture
async def db(migrated_database_url: str) -> AsyncIterator[Database]:
    database = Database.from_url(migrated_database_url)
    yield database
    await close_all()
    await database.dispose()


async def test_every_scope_that_matches_applies_and_no_other(db: Database) -> None:
    policy = Policy(
        [
            budget("all", usd=10),
            budget("support", scope={"channel": "C0SUPPORT"}, usd=10),
            budget("sales", scope={"channel": "C0SALES"}, usd=10),
            budget("alice", scope={"user": "U0ALICE"}, tokens=10_000),
            budget("bob", scope={"user": "U0BOB"}, tokens=10_000),
            budget("eng", scope={"group": "S0ENG"}, usd=10),
            budget("ops", scope={"group": "S0OPS"}, usd=10),
            budget("gh", scope={"pack": "github"}, usd=10),
            budget("linear", scope={"pack": "linear"}, usd=10),
            budget("each-turn", scope={"per_turn": True}, window="turn", tokens=5_000),
        ]
    )
    spend = spend_on(db, policy)
    held = await hold(spend)
    assert held.id is not None
    assert (held.tokens, held.nano) == (2000, CALL)
    standings = {s.name: s for s in await spend.standings(ALICE)}
    assert sorted(standings) == ["alice", "all", "each-turn", "eng", "gh", "support"]
    assert {s.reserved_nano for s in standings.values()} == {CALL}
    assert standings["each-turn"].window_key == "turn-1"
    assert standings["each-turn"].resets_at is None


async def test_no_budget_that_applies_costs_no_database_round_trip() -> None:
    nowhere = Database.from_url("postgresql://nobody@127.0.0.1:1/none")
    try:
        spend = spend_on(nowhere, Policy([budget("bob", scope={"user": "U0BOB"}, usd=1)]))
        held = await spend.reserve(ALICE, MODEL, 1000, 1000)
        assert held == Reservation(id=None, model=MODEL, tokens=2000, nano=CALL)
        assert await spend.settle(held, None, Tokens(1000, 10)) == []
        assert not spend_on(nowhere, Policy()).any
    finally:
        await nowhere.dispose()


async def test_a_full_budget_refuses_and_the_others_hold_nothing(db: Database) -> None:
    policy = Policy(
        [
            budget("roomy", usd=10),
            budget("tight", scope={"user": "U0ALICE"}, tokens=3000, owners=["U0LEAD"]),
        ]
    )
    spend = spend_on(db, policy)
    await hold(spend)
    refused = await refusal(spend)
    assert refused.standing.name == "tight"
    assert refused.standing.owners == ("U0LEAD",)
    assert (await standing(spend, "roomy")).reserved_nano == CALL  # the first call's only


async def test_settle_charges_the_reported_usage_else_the_counted(db: Database) -> None:
    spend = spend_on(db, Policy([budget("all", usd=10, tokens=100_000)]))
    first, second = await hold(spend), await hold(spend)
    await spend.settle(first, Tokens(1200, 300), counted=Tokens(1000, 250))
    await spend.settle(second, None, counted=Tokens(1000, 100))
    now = await standing(spend, "all")
    # 1,200 x $0.15 + 300 x $0.60 per million, then 1,000 x $0.15 + 100 x $0.60
    assert now.used_nano == 360_000 + 210_000
    assert now.used_tokens == 1500 + 1100
    assert (now.reserved_nano, now.reserved_tokens) == (0, 0)


async def test_cached_prompt_tokens_cost_the_cached_price(db: Database) -> None:
    spend = spend_on(db, Policy([budget("all", usd=10)]))
    held = await hold(spend)
    await spend.settle(held, Tokens(1000, 0, cached=1000), counted=Tokens(1000, 0))
    assert (await standing(spend, "all")).used_nano == 75_000  # $0.075 a million cached


async def test_settling_twice_charges_once(db: Database) -> None:
    spend = spend_on(db, Policy([budget("all", usd=10)]))
    held = await hold(spend)
    await asyncio.gather(*(spend.settle(held, Tokens(1000, 1000), Tokens(0, 0)) for _ in range(3)))
    now = await standing(spend, "all")
    assert (now.used_nano, now.reserved_nano) == (CALL, 0)


async def test_a_reload_lowering_a_limit_applies_mid_window(db: Database) -> None:
    policy = Policy([budget("all", tokens=100_000)])
    spend = spend_on(db, policy)
    held = await hold(spend)
    await spend.settle(held, Tokens(1000, 1000), Tokens(0, 0))
    policy.budgets = [budget("all", tokens=3000)]  # the file was edited and reloaded
    refused = await refusal(spend)
    assert (refused.standing.used_tokens, refused.standing.limit_tokens) == (2000, 3000)


async def test_a_raise_applies_to_its_window_once_per_key(db: Database) -> None:
    clock = Clock()
    spend = spend_on(db, Policy([budget("all", usd=Decimal("0.001"))]), clock)
    await hold(spend)
    await refusal(spend)
    for _ in range(2):  # the approval is applied twice (a retry, another replica)
        raised = await spend.raise_limit("all", "2026-11-27", Decimal("0.001"), None, key="p-7")
    assert raised.limit_nano == 2_000_000
    await hold(spend)
    clock.advance(days=1)  # the next window has the policy's limit again
    assert (await standing(spend, "all")).limit_nano == 1_000_000
    with pytest.raises(ValueError, match="no budget"):
        await spend.raise_limit("gone", "2026-11-27", Decimal(1), None, key="p-8")


async def test_two_raises_approved_at_once_end_at_the_higher_never_their_sum(
    db: Database, migrated_database_url: str
) -> None:
    """Each approver approved "to $X": on two replicas at once, the limit ends at the higher
    target (what one of them approved), not at the sum of what each found missing."""
    other = Database.from_url(migrated_database_url)
    try:
        policy = Policy([budget("all", usd=Decimal("0.001"), tokens=1000)])
        clock = Clock()
        first, second = spend_on(db, policy, clock), spend_on(other, policy, clock)
        await asyncio.gather(
            first.raise_to("all", "2026-11-27", Decimal("0.003"), 3000, key="p-1"),
            second.raise_to("all", "2026-11-27", Decimal("0.002"), 4000, key="p-2"),
        )
        raised = await standing(first, "all")
        assert (raised.limit_nano, raised.limit_tokens) == (3_000_000, 4000)
        again = await second.raise_to("all", "2026-11-27", Decimal("0.002"), 500, key="p-3")
        assert (again.limit_nano, again.limit_tokens) == (3_000_000, 4000)  # never lowered
    finally:
        await close_all()
        await other.dispose()


async def test_a_reload_after_an_approved_raise_never_stacks_on_it(db: Database) -> None:
    """Approvers approved "to $0.002" (twice the file's $0.001): the window's limit is the
    higher of that and the file's limit as reloaded, never the file's plus what the raise
    added then (a reload to $0.003 gave $0.004: more than anyone said)."""
    policy = Policy([budget("all", usd=Decimal("0.001"), tokens=1000)])
    spend = spend_on(db, policy)
    raised = await spend.raise_to("all", "2026-11-27", Decimal("0.002"), 1500, key="p-1")
    assert (raised.limit_nano, raised.limit_tokens) == (2_000_000, 1500)
    policy.budgets = [budget("all", usd=Decimal("0.003"), tokens=3000)]  # the operator raises
    now = await standing(spend, "all")
    assert (now.limit_nano, now.limit_tokens) == (3_000_000, 3000)
    policy.budgets = [budget("all", usd=Decimal("0.0005"), tokens=500)]  # and lowers it
    now = await standing(spend, "all")
    assert (now.limit_nano, now.limit_tokens) == (2_000_000, 1500)  # what was approved stays
    again = await spend.raise_to("all", "2026-11-27", Decimal("0.0015"), 1200, key="p-2")
    assert (again.limit_nano, again.limit_tokens) == (2_000_000, 1500)  # never lowered


async def test_a_soft_threshold_is_crossed_once_a_window_across_replicas(
    db: Database, migrated_database_url: str
) -> None:
    """Settling does not wait for the database: the threshold is decided under the window's
    lock as each replica writes its charges, and told through `on_soft`, once."""
    other = Database.from_url(migrated_database_url)
    try:
        policy = Policy([budget("all", tokens=10_000, soft=0.5, owners=["U0LEAD"])])
        clock = Clock()
        first, second = spend_on(db, policy, clock), spend_on(other, policy, clock)
        notices: list[SoftCrossing] = []

        async def heard(crossing: SoftCrossing) -> None:
            notices.append(crossing)

        first.on_soft = second.on_soft = heard
        pairs = [(s, await hold(s)) for s in (first, second, first, second)]
        crossed = await asyncio.gather(
            *(s.settle(h, Tokens(1000, 1000), Tokens(0, 0)) for s, h in pairs)
        )
        assert crossed == [[], [], [], []]  # nothing waits for the database
        await asyncio.gather(first.flush(), second.flush())
        assert len(notices) == 1  # 2,000 then 4,000, 6,000, 8,000 of 10,000: once at 6,000
        assert notices[0].standing.name == "all"
        assert notices[0].standing.owners == ("U0LEAD",)
        clock.advance(days=1)
        again = await hold(first, size=3000)
        await first.settle(again, Tokens(3000, 3000), Tokens(0, 0))
        await first.flush()
        assert len(notices) == 2
    finally:
        await close_all()
        await other.dispose()


async def test_a_budget_never_refuses_its_own_fallback_model(db: Database) -> None:
    policy = Policy(
        [
            budget("team", tokens=2000, fallback_model="gpt-4.1-nano"),
            budget("alice", scope={"user": "U0ALICE"}, tokens=5000),
        ]
    )
    spend = spend_on(db, policy)
    await hold(spend)
    await refusal(spend)
    await hold(spend, "gpt-4.1-nano")  # recorded in "team" too, past its limit
    assert (await standing(spend, "team")).reserved_tokens == 4000
    refused = await refusal(spend, "gpt-4.1-nano")
    assert refused.standing.name == "alice"


async def test_a_fallback_naming_the_configured_model_spares_nothing(db: Database) -> None:
    """A budget whose fallback_model is LLM_MODEL itself would limit nothing if its fallback
    were spared: the configured model's calls are refused at the limit all the same."""
    policy = Policy([budget("team", tokens=2000, fallback_model=MODEL)])
    spend = Spend(db, policy, Prices.load(None), now=Clock(), main_model=MODEL)
    await hold(spend)
    refused = await refusal(spend)
    assert refused.standing.name == "team"


async def test_a_day_ends_at_midnight_in_the_budgets_time_zone(db: Database) -> None:
    clock = Clock()
    clock.at = clock.at.replace(hour=22, minute=30)  # 23:30 in Paris
    policy = Policy([budget("paris", tokens=2000)], timezone="Europe/Paris")
    spend = spend_on(db, policy, clock)
    await hold(spend)
    full = await refusal(spend)
    assert full.standing.window_key == "2026-11-27"
    assert full.standing.resets_at is not None
    assert full.standing.resets_at.isoformat() == "2026-11-28T00:00:00+01:00"
    clock.advance(minutes=45)  # 00:15 in Paris, still the 27th in UTC
    await hold(spend)
    (now,) = await spend.standings(ALICE)
    assert now.window_key == "2026-11-28"


async def test_release_stale_charges_a_dead_calls_whole_estimate(db: Database) -> None:
    clock = Clock()
    spend = spend_on(db, Policy([budget("all", usd=10)]), clock)
    dead = await hold(spend)
    clock.advance(minutes=30)
    await hold(spend)  # alive, younger than ten minutes
    assert await spend.release_stale(timedelta(minutes=10)) == 1
    assert await spend.release_stale(timedelta(minutes=10)) == 0
    assert await spend.settle(dead, Tokens(10, 10), Tokens(10, 10)) == []  # too late
    now = await standing(spend, "all")
    assert (now.used_nano, now.reserved_nano) == (CALL, CALL)


async def test_owners_see_the_budgets_they_own(db: Database) -> None:
    policy = Policy(
        [
            budget("mine", usd=1, owners=["U0LEAD"]),
            budget("finance", usd=1, owners=["S0FINANCE"]),
            budget("other", usd=1, owners=["U0BOB"]),
        ]
    )
    spend = spend_on(db, policy)
    owned = await spend.owned("U0LEAD", frozenset({"S0FINANCE"}))
    assert [s.name for s in owned] == ["finance", "mine"]
    assert await spend.standing("nope") is None


def sample(name: str, scope: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, {"scope": scope, **labels}) or 0.0


async def test_spend_and_refusals_are_exported_by_scope(db: Database) -> None:
    spend = spend_on(db, Policy([budget("me", scope={"user": "U0ALICE"}, tokens=2000)]))
    before = (
        sample("countersign_spend_tokens_total", "user"),
        sample("countersign_spend_refusals_total", "user"),
        sample("countersign_spend_reservations_total", "user", event="settled"),
    )
    await spend.settle(await hold(spend), Tokens(1000, 500), Tokens(0, 0))
    await spend.reserve(ALICE, MODEL, 1000, 1000)  # 1,500 used: no room for 2,000 more
    after = (
        sample("countersign_spend_tokens_total", "user"),
        sample("countersign_spend_refusals_total", "user"),
        sample("countersign_spend_reservations_total", "user", event="settled"),
    )
    assert [b - a for a, b in zip(before, after, strict=True)] == [1500, 1, 1]


async def test_calls_reserving_and_settling_at_once_on_two_replicas_add_up(
    db: Database, migrated_database_url: str
) -> None:
    """Holds and charges cross between replicas while other calls reserve: every window row
    is locked in one order, so nothing waits in a circle, and every token is counted once."""
    other = Database.from_url(migrated_database_url)
    try:
        policy = Policy(
            [
                budget("all", usd=10, soft=0.9),
                budget("eng", scope={"group": "S0ENG"}, tokens=10**6),
                budget("support", scope={"channel": "C0SUPPORT"}, usd=10),
            ]
        )
        spends = [spend_on(db, policy), spend_on(other, policy)]

        async def call(i: int) -> None:
            held = await hold(spends[i % 2], asker=replace(ALICE, turn_key=f"t{i}"), size=100)
            await spends[(i + 1) % 2].settle(held, Tokens(60, 40), Tokens(0, 0))

        await asyncio.gather(*(call(i) for i in range(30)))
        await asyncio.gather(*(s.flush() for s in spends))  # each writes its settles behind
        for name in ("all", "eng", "support"):
            now = await standing(spends[0], name)
            assert (now.used_tokens, now.reserved_tokens, now.reserved_nano) == (3000, 0, 0)
            assert now.used_nano == 30 * (60 * 150 + 40 * 600)
    finally:
        await close_all()
        await other.dispose()


async def test_the_policy_files_budgets_are_read_at_every_call(
    db: Database, tmp_path: Path
) -> None:
    path = tmp_path / "policy.yaml"
    body = "version: 1\ndefault: ask\nrules: []\ntimezone: Europe/Paris\nbudgets:\n"
    path.write_text(body + "  - {name: all, scope: {workspace: true}, window: day, tokens: 9000}\n")
    source = PolicySource(path)
    source.load()
    spend = Spend(db, source.budgets, Prices.load(None), now=Clock())
    await spend.settle(await hold(spend), Tokens(1000, 1000), Tokens(0, 0))
    path.write_text(body + "  - {name: all, scope: {workspace: true}, window: day, tokens: 3000}\n")
    assert source.refresh()  # the watcher's check found the edit
    refused = await refusal(spend)
    assert (refused.standing.limit_tokens, refused.standing.timezone) == (3000, "Europe/Paris")
