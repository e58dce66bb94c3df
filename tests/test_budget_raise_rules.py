"""Issue 29, "Ask to raise": what decides a raise and what the form and the model may send.
The one decision gives it to the budget's owners (four-eyes unless a rule naming it says
otherwise, never a grant), an allow still needs a card and a deny names its reason; `policy
check` knows the action; bad or hidden input on the form proposes nothing or shows every
character; the model is never offered the action."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.policy import cli
from bot.policy.engine import Facts, decide
from bot.policy.model import load_text
from bot.states import State
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack
from tests.harness import RunningBot
from tests.raise_helpers import (
    BUDGET,
    FINANCE,
    applied,
    ask,
    budget_policy,
    card_in,
    pause_turn,
    raises,
    raising_bot,
    shows,
    today,
)
from tests.test_approvals_flow import call


@pytest.fixture
async def raising(
    request: pytest.FixtureRequest,
    fake_slack: FakeSlack,
    fake_model: FakeOpenAI,
    sqlite_url: str,
    tmp_path: Path,
) -> AsyncIterator[RunningBot]:
    policy = getattr(request, "param", budget_policy())
    async with raising_bot(fake_slack, fake_model, sqlite_url, tmp_path, policy) as bot:
        yield bot


async def test_a_reason_hiding_characters_shows_them_on_the_card(
    raising: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """The owners read every character the asker sent, and a mention does not ping."""
    bot = raising
    _pause_id, card = await pause_turn(bot, fake_slack, fake_model)
    reason = "ok\u202ethen <!channel> <@UCAT>"
    status, _ = await ask(bot, fake_slack, card, "UALICE", {"reason": reason})
    assert status == 200
    bob = await card_in(fake_slack, "DBOB")
    shown = shows(bob)
    assert "[U+202E]" in shown
    assert "\u202e" not in shown
    assert "<!channel>" not in shown
    mrkdwn = json.dumps([b for b in bob.blocks or [] if '"mrkdwn"' in json.dumps(b)])
    assert "<@UCAT>" not in mrkdwn  # shown as plain text only: it pings nobody


@pytest.mark.parametrize(
    ("typed", "error"),
    [
        ("lots", "Write an amount in dollars"),
        ("12.00", "more than the limit now, $12.00"),
        ("9.5", "more than the limit now"),
        ("24.005", "dollars and cents"),
        ("5000000", "more than any budget may hold"),
        ("1e30", "more than any budget may hold"),  # too long for cents: no crash
        ("9" * 30, "more than any budget may hold"),
        ("-1e30", "more than the limit now"),
        ("NaN", "Write an amount in dollars"),
    ],
)
async def test_bad_input_on_the_form_is_an_error_on_its_field_and_proposes_nothing(
    raising: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI, typed: str, error: str
) -> None:
    bot = raising
    _pause_id, card = await pause_turn(bot, fake_slack, fake_model)
    status, body = await ask(bot, fake_slack, card, "UALICE", {"usd": typed})
    assert status == 200
    assert '"errors"' in body
    assert error in body
    assert '"usd"' in body
    assert await raises(bot) == []


@pytest.mark.parametrize(
    "raising",
    [budget_policy(rules="rules:\n  - {name: raises-run, tools: [budget_raise], outcome: allow}")],
    indirect=True,
)
async def test_an_allow_rule_never_lets_a_raise_through_without_a_card(
    raising: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = raising
    _pause_id, card = await pause_turn(bot, fake_slack, fake_model)
    await ask(bot, fake_slack, card)
    (proposal,) = await raises(bot)
    assert proposal.state == State.PROPOSED
    assert await applied(bot) == []
    assert proposal.policy is not None
    assert proposal.policy["approvers"] == ["UBOB", FINANCE]
    await card_in(fake_slack, "DBOB")


@pytest.mark.parametrize(
    "raising",
    [
        budget_policy(
            rules="rules:\n  - {name: no-raises, tools: [budgets], outcome: deny, "
            "reason: spend is frozen this quarter}"
        )
    ],
    indirect=True,
)
async def test_a_deny_rule_naming_the_pack_refuses_the_raise_with_its_reason(
    raising: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = raising
    _pause_id, card = await pause_turn(bot, fake_slack, fake_model)
    status, body = await ask(bot, fake_slack, card)
    assert status == 200
    assert "spend is frozen this quarter" in body
    assert await raises(bot) == []


async def test_the_model_is_never_offered_the_raise_and_a_call_naming_it_is_refused(
    raising: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    bot = raising
    args = {"budget": BUDGET, "window": today(), "usd": "1000.00"}
    fake_model.script(Script(tool_calls=[call("budget_raise", args)]), Script(text="ok"))
    await bot.mention("C1", "raise my budget", fake_slack)
    await bot.idle()
    offered = [t["function"]["name"] for t in fake_model.requests[0].body.get("tools") or []]
    assert "budget_raise" not in offered
    told = [m for m in fake_model.requests[1].body["messages"] if m["role"] == "tool"]
    assert "there is no tool 'budget_raise'" in told[0]["content"]
    assert await raises(bot) == []
    assert await applied(bot) == []


def test_policy_check_knows_the_raise_and_its_pack(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A rule naming `budget_raise` or `budgets` is no typo, and its quorum is the owners'."""
    path = tmp_path / "policy.yaml"
    rules = "rules:\n  - {name: raises-two, tools: [budgets, budget_raise], outcome: ask, "
    path.write_text(budget_policy(rules=rules + "approvals_required: 2}"))
    assert cli.check(path, strict=True) == 0, capsys.readouterr()


@pytest.mark.parametrize(
    ("rules", "outcome", "four_eyes", "quorum", "route"),
    [
        ("rules: []", "ask", True, 1, "dm"),
        ("default: allow\nrules: []", "ask", True, 1, "dm"),
        ("default: deny\nrules: []", "deny", None, None, None),
        (
            "rules:\n  - {name: r, tools: [budget_raise], outcome: ask, four_eyes: false, "
            "approvals_required: 2, route: thread, approvers: [UMALLORY], grants: [me]}",
            "ask",
            False,
            2,
            None,
        ),
        (
            "rules:\n  - {name: all, tools: ['*'], outcome: ask, approvers: [UCAROL]}",
            "ask",
            True,
            1,
            "dm",
        ),
    ],
)
def test_the_one_decision_gives_a_raise_to_the_budget_owners(
    rules: str, outcome: str, four_eyes: bool | None, quorum: int | None, route: str | None
) -> None:
    text = budget_policy(rules=rules).replace("default: ask\ndefault: ", "default: ")
    policy = load_text(text)
    facts = Facts("budget_raise", "budgets", {"budget": BUDGET}, "C1", "UALICE")
    decided = decide(policy, "1@x", facts).record()
    assert decided["outcome"] == outcome
    if outcome == "ask":
        assert decided["approvers"] == ["UBOB", FINANCE]  # never the rule's own approvers
        assert (decided["four_eyes"], decided["approvals_required"]) == (four_eyes, quorum)
        assert decided.get("route") == route
        assert "grants" not in decided
    other = Facts("budget_raise", "budgets", {"budget": "nope"}, "C1", "UALICE")
    assert decide(policy, "1@x", other).outcome == "deny"  # no such budget


def test_a_budget_without_owners_cannot_be_raised_by_anyone_not_even_its_asker() -> None:
    """An ask naming no approvers is the requester's own to decide: for a raise that would
    let the asker raise their own limit (with a rule turning four-eyes off). Denied."""
    text = (
        "version: 1\ndefault: ask\n"
        "rules:\n  - name: raises\n    tools: [budget_raise]\n    outcome: ask\n"
        "    four_eyes: false\n"
        "budgets:\n  - name: lonely\n    scope: {workspace: true}\n    window: day\n"
        "    usd: 1\n"
    )
    facts = Facts("budget_raise", "budgets", {"budget": "lonely"}, "C1", "UALICE")
    decided = decide(load_text(text), "1@x", facts)
    assert decided.outcome == "deny"
    assert decided.reason == "this budget names no owners, so nobody may raise it"
