"""What a turn's model calls count against budgets (issue 29), through the front door: the
usage the server reported (or this side's count), a Stop, a cut stream or a model error
settled, every scope and window, a reload, the soft notice, summaries and titles at a limit,
no cost without budgets, and two replicas never past a limit."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.conversation.memory import Memory
from bot.conversation.spending import SpendGate, TurnRun
from bot.conversation.tokens import TokenCounter
from bot.db.migrate import upgrade_to_head
from bot.db.session import Database
from bot.slack.budget_card import ASK_RAISE
from bot.spend.budget_model import Budget
from bot.spend.ledger import Spend
from bot.spend.prices import Prices
from bot.spend.standing import Asker, Refused, Reservation, Standing
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack, wait_until
from tests.harness import running
from tests.spend_front import (
    BIG,
    alices_budget,
    ask,
    budget,
    buttons,
    pause_cards,
    policy,
    spend_of,
    spend_running,
    standing,
)
from tests.spend_helpers import eighty_turns
from tests.test_llm_stream import llm_for
from tests.test_memory import BUDGET as MEMORY_BUDGET


async def test_spend_recorded_is_the_usage_the_model_reported(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, tmp_path: Path
) -> None:
    path = alices_budget(tmp_path)
    async with spend_running(fake_slack, fake_model, sqlite_url, path) as spend_bot:
        fake_model.script(Script(text="one two three", prompt_tokens=123))
        await ask(spend_bot, fake_slack, "a question")
        assert (await standing(spend_bot)).used_tokens == 123 + 3


async def test_a_server_that_reports_no_usage_is_counted_here(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, tmp_path: Path
) -> None:
    path = alices_budget(tmp_path)
    async with spend_running(fake_slack, fake_model, sqlite_url, path) as spend_bot:
        fake_model.script(Script(text="one two three", reports_usage=False))
        await ask(spend_bot, fake_slack, "a question")
        used = await standing(spend_bot)
        assert used.used_tokens != BIG + 3  # not the usage the server would have reported
        assert 100 < used.used_tokens < 5_000  # the prompt counted here (the tools' schemas too)


async def test_a_reload_lowering_the_limit_pauses_the_next_turn(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, tmp_path: Path
) -> None:
    policy_path = alices_budget(tmp_path)
    async with spend_running(fake_slack, fake_model, sqlite_url, policy_path) as spend_bot:
        fake_model.default = Script(text="An answer.", prompt_tokens=10)
        await ask(spend_bot, fake_slack, "first question")
        await ask(spend_bot, fake_slack, "second question")
        assert not pause_cards(fake_slack)
        policy_path.write_text(policy(budget("user: UALICE", tokens=40)))
        assert await spend_bot.countersign.reload_policy()
        await ask(spend_bot, fake_slack, "third question")
        assert len(fake_model.requests) == 2
        [card] = pause_cards(fake_slack)
        assert buttons(card) == [ASK_RAISE]  # no cheaper model named: only the raise


SCOPES = {  # scope, where the counted person asks, (who and where is not counted)
    "workspace": ("workspace: true", "C1", None),
    "pack": ("pack: tasks", "C1", None),  # the tasks pack is offered in every turn
    "channel": ("channel: C01", "C01", ("UALICE", "C1")),
    "user": ("user: UALICE", "C1", ("UBOB", "C1")),
    "group": ("group: S0TEAM", "C1", ("UBOB", "C1")),
}


@pytest.mark.parametrize("kind", sorted(SCOPES))
async def test_each_scope_pauses_whom_it_counts_and_nobody_else(
    kind: str,
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    sqlite_url: str,
    tmp_path: Path,
) -> None:
    scope, channel, other = SCOPES[kind]
    fake_slack.user_groups["S0TEAM"] = ["UALICE"]
    path = tmp_path / "policy.yaml"
    path.write_text(policy(budget(scope)))
    async with spend_running(fake_slack, fake_model, sqlite_url, path) as bot:
        await bot.mention(channel, "first question", fake_slack)
        await bot.idle()
        if other is not None:  # someone (or somewhere) the budget does not count goes on
            await bot.mention(other[1], "elsewhere", fake_slack, user=other[0])
            await bot.idle()
            assert len(fake_model.requests) == 2
        await bot.mention(channel, "again", fake_slack)
        await bot.idle()
        assert len(fake_model.requests) == (1 if other is None else 2)
        assert len(pause_cards(fake_slack, channel)) == 1


async def test_a_per_turn_budget_counts_each_turn_afresh(
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    sqlite_url: str,
    tmp_path: Path,
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(policy(budget("per_turn: true", window="turn")))
    async with spend_running(fake_slack, fake_model, sqlite_url, path) as bot:
        for text in ("one", "two", "three"):
            await ask(bot, fake_slack, text)
        assert len(fake_model.requests) == 3
        assert not pause_cards(fake_slack)


@pytest.mark.parametrize(
    ("window", "later"),
    [
        ("day", datetime(2026, 11, 28, 0, 1, tzinfo=UTC)),
        ("week", datetime(2026, 11, 30, 0, 1, tzinfo=UTC)),  # the Monday after
        ("month", datetime(2026, 12, 1, 0, 1, tzinfo=UTC)),
    ],
)
async def test_a_calendar_window_resets(
    window: str,
    later: datetime,
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    sqlite_url: str,
    tmp_path: Path,
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(policy(budget("workspace: true", window=window)))
    now: list[datetime] = [datetime(2026, 11, 27, 23, 59, tzinfo=UTC)]
    async with spend_running(fake_slack, fake_model, sqlite_url, path) as bot:
        spend_of(bot).now = lambda: now[0]
        await ask(bot, fake_slack, "one")
        await ask(bot, fake_slack, "two")
        assert len(fake_model.requests) == 1
        assert len(pause_cards(fake_slack)) == 1
        now[0] = later
        await ask(bot, fake_slack, "three")
        assert len(fake_model.requests) == 2


@pytest.mark.parametrize(
    ("owners", "told"), [("[UBOB]", ["UBOB"]), ("[S0FIN, UCAT]", ["UBOB", "UDAN", "UCAT"])]
)
async def test_the_owners_hear_of_the_soft_threshold_once_a_window(
    owners: str,
    told: list[str],
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    sqlite_url: str,
    tmp_path: Path,
) -> None:
    """Owners named as a user group are its members, each told once (in their DM)."""
    fake_slack.user_groups["S0FIN"] = ["UDAN", "UBOB"]
    path = tmp_path / "policy.yaml"
    soft = "    soft: 0.5\n"
    made = budget("workspace: true", tokens=100_000, extra=soft)
    path.write_text(policy(made.replace("owners: [UBOB]", f"owners: {owners}")))
    async with spend_running(fake_slack, fake_model, sqlite_url, path) as bot:
        fake_model.default = Script(text="An answer.", prompt_tokens=30_000)
        for text in ("one", "two", "three"):
            await ask(bot, fake_slack, text)
        notices = [
            m.text for ms in fake_slack.channels.values() for m in ms if "has used" in m.text
        ]
    said = "demo has used 50% (60,004 of 100,000 tokens today; resets 00:00 UTC)"
    assert notices == [said] * len(told)
    opened = [c.args.get("users") for c in fake_slack.calls_to("conversations.open")]
    assert opened == told  # each owner, in a DM


async def test_a_pack_whose_tools_are_not_offered_counts_nothing(
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    sqlite_url: str,
    tmp_path: Path,
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(policy(budget("pack: github")))
    async with spend_running(fake_slack, fake_model, sqlite_url, path) as bot:
        for text in ("one", "two"):
            await ask(bot, fake_slack, text)
        assert len(fake_model.requests) == 2
        assert (await standing(bot)).used_tokens == 0


async def test_a_stop_mid_stream_settles_what_was_used(
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    sqlite_url: str,
    tmp_path: Path,
) -> None:
    words = " ".join(f"token{i}" for i in range(200)) + "."
    fake_model.script(Script(text=words, tokens_per_second=40))
    path = alices_budget(tmp_path)
    async with spend_running(fake_slack, fake_model, sqlite_url, path, streaming="auto") as bot:
        root = await bot.mention("C1", "write a long essay", fake_slack)
        await wait_until(lambda: _shown(fake_slack) >= 5)
        held = await standing(bot)
        assert held.reserved_tokens > 100  # the call holds its estimate while it streams
        assert await bot.send_event(fake_slack.press_stop("C1", root, "UALICE")) == 200
        await bot.idle()
        used = await standing(bot)
        assert used.reserved_tokens == 0
        # No usage came (the stream was cut): the prompt counted here and the words streamed.
        assert held.reserved_tokens - 100 + 5 <= used.used_tokens
        assert used.used_tokens < held.reserved_tokens - 100 + 200


def _shown(slack: FakeSlack) -> int:
    streamed = slack.streamed_messages("C1")
    return len(streamed[0].text.split()) if streamed else 0


async def test_a_model_error_settles_and_the_hold_is_released(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, tmp_path: Path
) -> None:
    path = alices_budget(tmp_path)
    async with spend_running(fake_slack, fake_model, sqlite_url, path) as spend_bot:
        fake_model.script(Script(fail_status=400))
        await ask(spend_bot, fake_slack, "a question")
        used = await standing(spend_bot)
        assert used.reserved_tokens == 0
        assert used.used_tokens < 5_000  # the prompt sent, counted here; nothing came back


async def test_at_the_limit_a_title_is_skipped_not_paused(
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    sqlite_url: str,
    tmp_path: Path,
) -> None:
    path = alices_budget(tmp_path)
    async with spend_running(
        fake_slack, fake_model, sqlite_url, path, title_model="fake-model"
    ) as bot:
        await ask(bot, fake_slack, "first question")
        titled = len(fake_model.bodies) - len(fake_model.requests)
        assert titled == 1  # the first conversation's title was asked of the model
        await ask(bot, fake_slack, "second question")
        assert len(fake_model.bodies) - len(fake_model.requests) == titled
        assert len(pause_cards(fake_slack)) == 1  # one card: the turn's, none for the title


class _NoDatabase:
    """A database that fails any use: the gate must not touch it."""

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"the database was used ({name}) with no budget configured")


async def test_with_no_budget_a_model_call_costs_no_database_round_trip() -> None:
    db: Any = _NoDatabase()
    spend = Spend(db, lambda: ([], "UTC"), Prices({}))
    gate = SpendGate(db, spend, TokenCounter("fake-model"), 100)
    conversation: Any = object()
    llm: Any = object()
    held, meter = await gate.hold(conversation, "UALICE", TurnRun(llm), frozenset(), [], None)
    assert (held, meter) == (None, None)
    await gate.settle(held, meter)


@pytest.mark.postgres
async def test_two_replicas_never_start_a_call_over_the_limit(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, migrated_postgres_url: str, tmp_path: Path
) -> None:
    """Six turns at once on two bots sharing one PostgreSQL, against a budget with room for
    three calls' estimates (each about 20,000 tokens: REPLY_TOKENS dominates it): three calls
    start and hold their estimates while the model is silent, the other three turns pause.
    Each turn has a channel of its own (Slack's 3 posts in 3 s per channel would delay some
    turns by seconds) and the silent calls outlast the test (a call timed out settles, and
    frees room another turn may then take, rightly)."""
    path = tmp_path / "policy.yaml"
    path.write_text(policy(budget("workspace: true", tokens=80_000)))
    fake_model.default = Script(text="An answer.", hang_after_tokens=0)
    extra: dict[str, Any] = {
        "reply_tokens": 20_000,
        "token_budget": 40_000,
        "llm_timeout_seconds": 120,
    }
    async with (
        running(fake_slack, fake_model, migrated_postgres_url, policy_file=path, **extra) as a,
        running(fake_slack, fake_model, migrated_postgres_url, policy_file=path, **extra) as b,
    ):
        channels = [f"C0SPEND{n}" for n in range(6)]
        await asyncio.gather(
            *(
                bot.mention(channel, f"question {n}", fake_slack)
                for n, (channel, bot) in enumerate(zip(channels, [a, b] * 3, strict=True))
            )
        )

        def paused() -> int:
            return sum(len(pause_cards(fake_slack, c)) for c in channels)

        await wait_until(lambda: len(fake_model.requests) + paused() == 6, timeout=30)
        assert len(fake_model.requests) == 3
        fake_model.release_hangs()
        await a.idle()
        await b.idle()
    assert paused() == 3


class _AlwaysRefused(Spend):
    """A ledger whose one budget is always used up (a summary's call meets its limit)."""

    async def reserve(
        self, asker: Asker, model: str, prompt_tokens: int, max_tokens: int
    ) -> Reservation | Refused:
        budget = self.budgets()[0][0]
        return Refused(
            Standing(
                budget.name, "workspace", None, "day", "2026-11-27", 0, 0, None, 3_000, 0,
                3_000, None, "UTC", (), None, None,
            )
        )  # fmt: skip


async def test_at_the_limit_a_summary_is_skipped_and_the_window_still_fits(
    migrated_database_url: str, fake_model: FakeOpenAI
) -> None:
    db = Database.from_url(migrated_database_url)
    try:
        await upgrade_to_head(db)
        llm = llm_for(fake_model)
        memory = Memory(db, llm, TokenCounter("gpt-4o-mini"), MEMORY_BUDGET)
        spent = [Budget.model_validate(yaml.safe_load(budget("workspace: true"))[0])]
        spend = _AlwaysRefused(db, lambda: (spent, "UTC"), Prices({}))
        memory.spending = SpendGate(db, spend, memory.counter, 100)
        conversation_id = await eighty_turns(db)
        prompt = await memory.prompt(conversation_id, "You are a bot.", None, 200)
        assert fake_model.summaries == []  # never asked: the budget had no room
        assert memory.counter.messages(prompt) <= MEMORY_BUDGET.total
        assert "turn 79" in str(prompt[-2]["content"])  # the newest turns are there
    finally:
        await db.dispose()


async def test_a_budget_added_by_a_reload_applies_to_the_next_turn(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(policy())
    async with spend_running(fake_slack, fake_model, sqlite_url, path) as bot:
        await ask(bot, fake_slack, "first question")
        assert bot.countersign.conversations.spending.ledger() is None  # none was made
        path.write_text(policy(budget("workspace: true", tokens=100)))
        assert await bot.countersign.reload_policy()
        await ask(bot, fake_slack, "second question")
        assert len(fake_model.requests) == 1
        [card] = pause_cards(fake_slack)
        assert "0 of 100 tokens today" in card.text


async def test_a_hold_left_by_a_call_cut_off_is_charged_and_freed_by_the_sweeper(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, tmp_path: Path
) -> None:
    """A process that died mid-call leaves its hold: the running bot's sweeper charges it its
    whole estimate and frees the room it held, once the call cannot still be running."""
    from sqlalchemy import update

    from bot.db.models import SpendReservation, utcnow

    path = alices_budget(tmp_path)
    async with spend_running(fake_slack, fake_model, sqlite_url, path) as spend_bot:
        spend = spend_of(spend_bot)
        alice = Asker("T1", "C1", "UALICE", frozenset(), frozenset(), "a-dead-turn")
        held = await spend.reserve(alice, "gpt-4o-mini", 400, 100)
        assert isinstance(held, Reservation)
        assert held.id is not None
        before = await standing(spend_bot)
        assert (before.reserved_tokens, before.used_tokens) == (500, 0)
        for job in spend_bot.countersign.sweeper.jobs:
            await job()  # a fresh hold is left alone: its call may be running
        assert (await standing(spend_bot)).reserved_tokens == 500
        async with spend_bot.countersign.db.transaction() as session:
            await session.execute(
                update(SpendReservation)
                .where(SpendReservation.id == held.id)
                .values(created_at=utcnow() - timedelta(hours=1))
            )
        for job in spend_bot.countersign.sweeper.jobs:
            await job()
        after = await standing(spend_bot)
        assert (after.reserved_tokens, after.used_tokens) == (0, 500)
