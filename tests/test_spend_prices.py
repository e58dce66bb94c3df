"""Model prices (shipped defaults, MODEL_PRICES over them, a bad file refused clearly), the
windows budgets count in, the one sentence people read a budget in, and doctor's check that
every model a dollar budget may use has a price."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from bot.config import SettingsError, load_settings
from bot.doctor_spend import check_prices
from bot.spend.prices import Price, Prices
from bot.spend.standing import Standing
from bot.spend.windows import sentence, window_at, window_named
from tests.fakes import openai as fake_openai
from tests.harness import clean_env, run_cli
from tests.spend_helpers import budget

BASE = {"slack_bot_token": "xoxb-1", "openai_api_key": "sk-x", "_env_file": None}


def test_shipped_prices_cover_common_models_and_the_fakes() -> None:
    prices = Prices.load(None)
    for model in ("gpt-4o", "gpt-4o-mini", "gpt-4.1", "o3", "o4-mini", "gpt-5", "gpt-5-mini"):
        assert prices.of(model) is not None, model
    mini = prices.of("gpt-4o-mini")
    assert mini == Price(Decimal("0.15"), Decimal("0.60"), Decimal("0.075"))
    assert prices.of(fake_openai.MODEL) == mini  # the tests' and the sandbox's show dollars
    assert prices.of("countersign-demo") == mini
    assert prices.nano("gpt-4o-mini", 1_000_000, 1_000_000) == 750_000_000  # $0.75
    assert prices.nano("gpt-4o-mini", 1000, 0, cached=400) == 90_000 + 30_000
    assert prices.nano("no-such-model", 1000, 1000) == 0


def test_a_prices_file_is_merged_over_the_defaults(tmp_path: Path) -> None:
    yaml_file = tmp_path / "prices.yaml"
    yaml_file.write_text("gpt-4o: {input: 2, output: 8}\nllama3.1: {input: 0.1, output: 0.1}\n")
    prices = load_settings(**BASE, model_prices=str(yaml_file)).load_prices()
    assert prices.of("gpt-4o") == Price(Decimal(2), Decimal(8), None)
    assert prices.of("llama3.1") == Price(Decimal("0.1"), Decimal("0.1"), None)
    assert prices.of("gpt-4o-mini") is not None  # the others stay
    json_file = tmp_path / "prices.json"
    json_file.write_text('{"local": {"input": 0, "cached_input": 0, "output": 0}}')
    assert Prices.load(json_file).of("local") == Price(Decimal(0), Decimal(0), Decimal(0))


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("gpt-4o: {input: 2}\n", "gpt-4o: output: Field required"),
        ("gpt-4o: {input: -1, output: 8}\n", "gpt-4o: input: Input should be greater"),
        ("gpt-4o: {input: 2, output: 8, cache: 1}\n", "gpt-4o: cache: Extra inputs"),
        ("gpt-4o: {input: 2, output: lots}\n", "gpt-4o: output: Input should be a valid"),
        ("- gpt-4o\n", "must map model names"),
        ("gpt-4o: {input: [\n", "is not valid YAML"),
    ],
)
def test_a_bad_prices_file_is_a_clear_settings_error(tmp_path: Path, text: str, said: str) -> None:
    path = tmp_path / "prices.yaml"
    path.write_text(text)
    with pytest.raises(SettingsError) as raised:
        load_settings(**BASE, model_prices=str(path))
    (problem,) = raised.value.problems
    assert problem.startswith("MODEL_PRICES is invalid")
    assert str(path) in problem
    assert said in problem


def test_a_bad_prices_file_stops_the_start_with_exit_2(tmp_path: Path) -> None:
    (tmp_path / "prices.json").write_text('{"gpt-4o": {"input": "x", "output": 1}}')
    env = clean_env(
        SLACK_BOT_TOKEN="xoxb-1",
        OPENAI_API_KEY="sk-x",
        SLACK_SIGNING_SECRET="s",
        MODEL_PRICES=str(tmp_path / "prices.json"),
    )
    result = run_cli(["run"], env, tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "MODEL_PRICES" in result.stderr
    assert "gpt-4o: input" in result.stderr


def test_calendar_windows_and_their_reset_in_the_budgets_time_zone() -> None:
    late = datetime(2026, 11, 29, 23, 30, tzinfo=UTC)  # Sunday; Monday 00:30 in Paris
    day, week, month = (budget(w, window=w, usd=1) for w in ("day", "week", "month"))
    assert window_at(day, "UTC", late, "t").key == "2026-11-29"
    assert window_at(day, "Europe/Paris", late, "t").key == "2026-11-30"
    assert window_at(week, "UTC", late, "t").key == "2026-W48"
    paris_week = window_at(week, "Europe/Paris", late, "t")
    assert paris_week.key == "2026-W49"
    assert paris_week.resets_at == datetime(2026, 12, 6, 23, 0, tzinfo=UTC)
    new_year = datetime(2026, 12, 31, 23, 30, tzinfo=UTC)
    assert window_at(month, "UTC", new_year, "t").key == "2026-12"
    assert window_at(month, "Europe/Paris", new_year, "t").key == "2027-01"
    december = window_at(month, "UTC", new_year, "t")
    assert december.resets_at == datetime(2027, 1, 1, tzinfo=UTC)
    assert window_named(month, "UTC", "2026-12") == december
    assert window_named(week, "Europe/Paris", "2026-W49") == paris_week
    turn = budget("t", scope={"per_turn": True}, window="turn", tokens=9)
    assert window_at(turn, "UTC", late, "turn-7").key == "turn-7"
    own_zone = budget("tokyo", usd=1, timezone="Asia/Tokyo")
    assert window_at(own_zone, "Europe/Paris", late, "t").key == "2026-11-30"


SUPPORT = Standing(
    name="support-daily",
    scope_kind="channel",
    scope_value="C0SUPPORT",
    window="day",
    window_key="2026-11-27",
    used_nano=12_000_000_000,
    reserved_nano=0,
    limit_nano=12_000_000_000,
    used_tokens=180_000,
    reserved_tokens=0,
    limit_tokens=None,
    resets_at=datetime(2026, 11, 28, tzinfo=UTC),
    timezone="UTC",
    owners=("U0LEAD",),
    fallback_model="gpt-4o-mini",
    soft=None,
)


def test_a_standing_is_said_in_one_sentence() -> None:
    assert sentence(SUPPORT) == "support-daily, $12.00 of $12.00 today; resets 00:00 UTC"
    tokens = replace(SUPPORT, limit_nano=None, limit_tokens=200_000)
    assert sentence(tokens) == "support-daily, 180,000 of 200,000 tokens today; resets 00:00 UTC"
    both = replace(SUPPORT, limit_tokens=200_000)
    assert sentence(both) == (
        "support-daily, $12.00 of $12.00 and 180,000 of 200,000 tokens today; resets 00:00 UTC"
    )
    week = replace(
        SUPPORT,
        window="week",
        timezone="Europe/Paris",
        resets_at=datetime(2026, 11, 29, 23, 0, tzinfo=UTC),
    )
    assert sentence(week).endswith("this week; resets Monday 00:00 Europe/Paris")
    month = replace(SUPPORT, window="month", resets_at=datetime(2026, 12, 1, tzinfo=UTC))
    assert sentence(month).endswith("this month; resets 1 Dec 00:00 UTC")
    turn = replace(SUPPORT, window="turn", resets_at=None, used_nano=4_200_000)
    assert sentence(turn) == "support-daily, $0.0042 of $12.00 this turn"


def test_what_replies_being_written_hold_counts_as_used_and_is_named() -> None:
    """A budget whose room is held by calls in flight is reached: the card says what stops
    the call, not a use far under the limit."""
    held = replace(
        SUPPORT,
        used_nano=11_000_000_000,
        reserved_nano=1_000_000_000,
        limit_tokens=200_000,
        used_tokens=150_000,
        reserved_tokens=50_000,
    )
    assert sentence(held) == (
        "support-daily, $12.00 of $12.00 and 200,000 of 200,000 tokens "
        "($1.00 and 50,000 tokens held by replies being written) today; resets 00:00 UTC"
    )


def policy_with(tmp_path: Path, budgets: str) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(f"version: 1\ndefault: ask\nrules: []\nbudgets:\n{budgets}")
    return path


def test_doctor_fails_when_a_dollar_budget_may_use_a_model_without_a_price(
    tmp_path: Path,
) -> None:
    policy = policy_with(
        tmp_path,
        "  - {name: team, scope: {workspace: true}, window: day, usd: 5, "
        "fallback_model: tiny-local}\n"
        "  - {name: tokens-only, scope: {workspace: true}, window: day, tokens: 9}\n",
    )
    settings = load_settings(**BASE, llm_model="llama3.1", policy_file=str(policy))
    check = check_prices(settings)
    assert not check.ok
    assert "'llama3.1', 'tiny-local'" in check.detail
    assert "MODEL_PRICES" in check.detail
    prices = tmp_path / "prices.yaml"
    prices.write_text("llama3.1: {input: 0, output: 0}\ntiny-local: {input: 0, output: 0}\n")
    priced = load_settings(
        **BASE, llm_model="llama3.1", policy_file=str(policy), model_prices=str(prices)
    )
    assert check_prices(priced).ok
    tokens_only = policy_with(
        tmp_path, "  - {name: t, scope: {workspace: true}, window: day, tokens: 9}\n"
    )
    unpriced = load_settings(**BASE, llm_model="llama3.1", policy_file=str(tokens_only))
    assert check_prices(unpriced).ok  # no budget counts dollars
