"""A person's usage is priced at the model that answered (issue 29), through the front door:
a turn continued on a budget's cheaper model costs that model's price in `/usage` and
/history, cached prompt tokens cost the cached price, answers stored before messages named
their model cost the configured model's, and /history sums a turn of several answers.
Summaries' and titles' calls settle their budget hold to the usage the server reported (or
to this side's count when it reports none)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from sqlalchemy import update

from bot.conversation.memory import Memory
from bot.conversation.spending import SpendGate, prompt_tokens
from bot.conversation.tokens import TokenCounter
from bot.db.migrate import upgrade_to_head
from bot.db.models import Message, Role
from bot.db.session import Database
from bot.llm import Finished
from bot.slack import cards
from bot.slack.budget_card import CONTINUE_CHEAPER
from bot.spend.budget_model import Budget
from bot.spend.ledger import Spend
from bot.spend.prices import Prices
from tests.fakes.openai import Completion, FakeOpenAI, Script
from tests.fakes.slack import FakeSlack
from tests.harness import RunningBot, running
from tests.spend_front import (
    alices_budget,
    ask,
    budget,
    pause_cards,
    policy,
    resumed,
    spend_running,
    standing,
)
from tests.spend_helpers import eighty_turns
from tests.test_approvals_flow import CREATE, call
from tests.test_llm_stream import llm_for
from tests.test_memory import BUDGET as MEMORY_BUDGET
from tests.test_records import answer
from tests.test_usage import no_ids_nor_json, shown, usage_of

# USD per million tokens; outputs free, so a sum names the prompts' prices alone.
PRICES = """\
fake-model: {input: 100, cached_input: 10, output: 0}
cheap-model: {input: 10, output: 0}
"""


def prices_file(tmp_path: Path) -> Path:
    path = tmp_path / "prices.yaml"
    path.write_text(PRICES)
    return path


def today(blocks: object) -> str:
    found = re.search(r"\*Today\*\\n([^\"]*)\"", shown(blocks))
    assert found, shown(blocks)
    return found.group(1)


async def history_of(bot: RunningBot, slack: FakeSlack, root: str) -> str:
    link = f"<https://test.slack.com/archives/C1/p{root.replace('.', '')}>"
    _, _, key = await bot.command(slack, "/history", link, "UALICE")
    blocks = (await answer(bot, slack, key))["blocks"]
    no_ids_nor_json(blocks)
    return shown(blocks)


async def test_a_turn_continued_on_the_cheaper_model_costs_the_cheaper_models_price(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, migrated_database_url: str, tmp_path: Path
) -> None:
    """5,000 prompt tokens on fake-model ($100/M: $0.50), then the paused turn's 5,000 on
    cheap-model ($10/M: $0.05): $0.55, not the $1.00 of both at the configured model's."""
    path = alices_budget(tmp_path)
    prices = prices_file(tmp_path)
    async with spend_running(
        fake_slack, fake_model, migrated_database_url, path, model_prices=prices
    ) as bot:
        await ask(bot, fake_slack, "first question")
        root = await ask(bot, fake_slack, "second question")
        [card] = pause_cards(fake_slack)
        assert await bot.click(card, CONTINUE_CHEAPER, "UALICE", "C1") == 200
        await resumed(bot, fake_model, 2)
        assert [r.body["model"] for r in fake_model.requests] == ["fake-model", "cheap-model"]
        blocks = await usage_of(bot, fake_slack, "UALICE")
        history = await history_of(bot, fake_slack, root)
    assert re.fullmatch(r"10,0\d\d tokens, \$0\.55", today(blocks)), today(blocks)
    note = shown(blocks)
    assert "each answer at the prices of the model that gave it" in note
    assert "cheap-model and fake-model" in note
    assert "at fake-model's prices" not in note
    assert re.search(r"· 5,0\d\d tokens, \$0\.05:", history), history


async def test_cached_prompt_tokens_cost_the_cached_price(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, tmp_path: Path
) -> None:
    """10,000 prompt tokens, 8,000 of them from the server's cache: 2,000 at $100/M and 8,000
    at $10/M, $0.28 (all at the input price would be $1.00), in /usage, /history and the
    budget it counts against."""
    path = tmp_path / "policy.yaml"
    path.write_text(policy(budget("workspace: true", tokens=1_000_000, extra="    usd: 50\n")))
    prices = prices_file(tmp_path)
    async with running(
        fake_slack, fake_model, sqlite_url, policy_file=path, model_prices=prices
    ) as bot:
        fake_model.script(Script(text="Cached.", prompt_tokens=10_000, cached_tokens=8_000))
        root = await ask(bot, fake_slack, "a long thread")
        blocks = await usage_of(bot, fake_slack, "UALICE")
        history = await history_of(bot, fake_slack, root)
        used = await standing(bot)
    assert re.fullmatch(r"10,00\d tokens, \$0\.28", today(blocks)), today(blocks)
    assert "at fake-model's prices" in shown(blocks)  # one model answered
    assert re.search(r"· 10,00\d tokens, \$0\.28:", history), history
    assert used.used_nano == 280_000_000


async def test_answers_stored_without_their_model_cost_the_configured_models_price(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, tmp_path: Path
) -> None:
    """Rows from before messages named their model: the configured model's price, as before
    (fake-model at $100/M: 1,000 prompt tokens $0.10)."""
    async with running(
        fake_slack, fake_model, sqlite_url, model_prices=prices_file(tmp_path)
    ) as bot:
        fake_model.script(Script(text="Old.", prompt_tokens=1_000))
        await ask(bot, fake_slack, "an old question")
        async with bot.countersign.db.transaction() as session:
            answered = await session.execute(
                update(Message)
                .where(Message.role == Role.ASSISTANT)
                .values(model=None, cached_tokens=None)
            )
            assert getattr(answered, "rowcount", 0) == 1
        blocks = await usage_of(bot, fake_slack, "UALICE")
    assert re.fullmatch(r"1,00\d tokens, \$0\.10", today(blocks)), today(blocks)
    assert "at fake-model's prices" in shown(blocks)


async def test_history_sums_a_turn_of_several_answers(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, migrated_database_url: str, tmp_path: Path
) -> None:
    """A read tool's round and the answer after it are one request: each answer shows its
    own usage, the last one the whole request's as well; a turn of one answer shows no sum."""
    async with running(
        fake_slack, fake_model, migrated_database_url, model_prices=prices_file(tmp_path)
    ) as bot:
        fake_model.script(
            Script(tool_calls=[call("list_tasks", {"status": "open"})], prompt_tokens=1_000),
            Script(text="Nothing is open.", prompt_tokens=2_000),
            Script(text="Later.", prompt_tokens=4_000),
        )
        root = await ask(bot, fake_slack, "what is open?")
        await bot.mention("C1", "and later?", fake_slack, thread_ts=root)
        await bot.idle()
        history = await history_of(bot, fake_slack, root)
    assert re.search(r"· 1,0\d\d tokens, \$0\.10:", history), history
    whole = re.search(
        r"· 2,0\d\d tokens, \$0\.20 \(the whole request: 3,0\d\d tokens, \$0\.30\):", history
    )
    assert whole, history
    assert re.search(r"· 4,0\d\d tokens, \$0\.40:", history), history
    assert history.count("the whole request") == 1


async def test_what_someone_else_writes_meanwhile_does_not_split_a_request(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, migrated_database_url: str, tmp_path: Path
) -> None:
    """Alice's request waits for its card's approval; Bob writes in the thread meanwhile (a
    message for Carol: kept as context, not answered). The answer before the card and the one
    after the approval are still one request in /history; Alice's next question is another."""
    async with running(
        fake_slack, fake_model, migrated_database_url, model_prices=prices_file(tmp_path)
    ) as bot:
        fake_model.script(
            Script(tool_calls=[call("create_task", CREATE)], prompt_tokens=1_000),
            Script(text="Created.", prompt_tokens=2_000),
            Script(text="Later.", prompt_tokens=4_000),
        )
        root = await ask(bot, fake_slack, "track the login bug")
        await bot.say(fake_slack, "C1", "<@UCAROL> fyi, see above", user="UBOB", thread_ts=root)
        await bot.idle()
        assert len(fake_model.requests) == 1  # Bob's message was not answered
        (card,) = fake_slack.cards("C1")
        assert await bot.click(card, cards.APPROVE, "UALICE", "C1") == 200
        await bot.idle()
        await bot.mention("C1", "and later?", fake_slack, thread_ts=root)
        await bot.idle()
        assert len(fake_model.requests) == 3
        history = await history_of(bot, fake_slack, root)
    whole = re.search(
        r"· 2,0\d\d tokens, \$0\.20 \(the whole request: 3,0\d\d tokens, \$0\.30\):", history
    )
    assert whole, history
    assert re.search(r"· 4,0\d\d tokens, \$0\.40:", history), history
    assert history.count("the whole request") == 1


async def test_a_titles_call_settles_to_the_usage_the_server_reported(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, tmp_path: Path
) -> None:
    path = alices_budget(tmp_path)
    async with spend_running(
        fake_slack, fake_model, sqlite_url, path, title_model="fake-model", reply_tokens=100
    ) as bot:
        fake_model.script(Script(text="one two three", prompt_tokens=123))
        fake_model.complete_for(
            "plan the release", Completion("Release plan", prompt_tokens=777, cached_tokens=7)
        )
        await ask(bot, fake_slack, "plan the release")
        assert len(fake_model.completions) == 1  # the title was asked
        used = await standing(bot)
    assert used.reserved_tokens == 0
    assert used.used_tokens == (123 + 3) + (777 + 8)  # the reply's and the title's, reported


async def test_a_titles_call_without_reported_usage_settles_to_the_count(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, tmp_path: Path
) -> None:
    path = alices_budget(tmp_path)
    async with spend_running(
        fake_slack, fake_model, sqlite_url, path, title_model="fake-model", reply_tokens=100
    ) as bot:
        fake_model.script(Script(text="one two three", prompt_tokens=123))
        fake_model.complete_for(
            "plan the release", Completion("Release plan", prompt_tokens=777, reports_usage=False)
        )
        await ask(bot, fake_slack, "plan the release")
        [asked] = fake_model.completions
        counter = bot.countersign.conversations.memory.counter
        counted = prompt_tokens(counter, asked["messages"], None) + counter.text("Release plan")
        used = await standing(bot)
    assert used.reserved_tokens == 0
    assert used.used_tokens == (123 + 3) + counted
    assert counted != 777 + 8


async def test_a_servers_odd_cached_count_is_kept_within_its_prompt(
    fake_model: FakeOpenAI,
) -> None:
    """More cached tokens than the prompt, or fewer than none: never a negative price, never a
    crash (the cached count is a part of the prompt)."""
    llm = llm_for(fake_model)
    try:
        for reported, kept in ((50_000, 1_000), (-5, 0), (None, 0)):
            fake_model.script(Script(text="ok", prompt_tokens=1_000, cached_tokens=reported))
            events = [e async for e in llm.stream([{"role": "user", "content": "q"}])]
            finished = events[-1]
            assert isinstance(finished, Finished)
            assert finished.usage is not None
            assert finished.usage.cached_tokens == kept
    finally:
        await llm.client.close()


async def test_a_summarys_call_settles_to_the_usage_the_server_reported(
    migrated_database_url: str, fake_model: FakeOpenAI
) -> None:
    """Memory's summary (a non-streamed call) counts what the fake server reported for it:
    a quarter of the transcript's characters as prompt, 8 tokens of answer."""
    db = Database.from_url(migrated_database_url)
    llm = llm_for(fake_model)
    try:
        await upgrade_to_head(db)
        memory = Memory(db, llm, TokenCounter("gpt-4o-mini"), MEMORY_BUDGET)
        found = yaml.safe_load(budget("workspace: true", tokens=10_000_000))[0]
        spend = Spend(db, lambda: ([Budget.model_validate(found)], "UTC"), Prices({}))
        memory.spending = SpendGate(db, spend, memory.counter, 100)
        conversation_id = await eighty_turns(db)
        await memory.prompt(conversation_id, "You are a bot.", None, 200)
        assert fake_model.summaries  # the older turns were summarised
        used = await spend.standing("demo")
        assert used is not None
        assert used.reserved_tokens == 0
        assert used.used_tokens == sum(len(t) // 4 + 8 for t in fake_model.summaries)
    finally:
        await llm.client.close()
        await db.dispose()
