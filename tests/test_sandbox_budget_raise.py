"""The sandbox shows a raise (issue 29): Alice's demo budget is used up and her thread shows
the pause card; she clicks "Ask to raise" and sends the form; Bob, the budget's owner, gets the
card in his DM and approves it; the pause card says he raised it and her turn goes on. Driven
as the page drives it (its routes), against the unchanged bot as a process."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.sandbox_browser import running_sandbox, state, ui_post
from tests.test_sandbox_budget import answered, cards, general, wait_for

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def sandbox() -> Iterator[str]:
    with running_sandbox(SANDBOX_DEMO_BUDGET="on") as (base, _process):
        yield base


def until(base: str, found: Callable[[dict[str, Any]], Any], what: str) -> Any:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        got = found(state(base))
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"no {what}")


def buttons(message: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        e["text"]["text"]: e
        for b in message.get("blocks") or []
        if b["type"] == "actions"
        for e in b["elements"]
    }


def click(base: str, user: str, channel: str, message: dict[str, Any], label: str) -> None:
    button = buttons(message)[label]
    ui_post(
        base,
        "/ui/action",
        {
            "user": user,
            "channel": channel,
            "ts": message["ts"],
            "action_id": button["action_id"],
            "value": button["value"],
        },
    )


def test_alice_asks_bob_to_raise_her_budget_and_her_turn_goes_on(sandbox: str) -> None:
    for n in range(1, 5):
        said = {"user": "UALICE", "channel": "C0GENERAL", "text": f"<@UBOT> hello {n}"}
        root = str(ui_post(sandbox, "/ui/message", said)["ts"])
        messages = wait_for(sandbox, lambda ms, r=root: answered(ms, r), "answer")
        if cards(messages):
            break
    card = cards(wait_for(sandbox, cards, "pause card"))[-1]
    click(sandbox, "UALICE", "C0GENERAL", card, "Ask to raise")
    views = until(sandbox, lambda s: (s.get("views") or {}).get("UALICE"), "raise form")
    form = views[-1]
    assert form["title"]["text"] == "Ask to raise"
    # The page sends every input as it shows it: the new limit as prefilled, and a reason.
    shown = {
        b["block_id"]: b["element"].get("initial_value", "")
        for b in form["blocks"]
        if b["type"] == "input"
    }
    assert set(shown) == {"tokens", "reason"}  # the demo budget limits tokens only
    shown["reason"] = "a demo for the team"
    values = {k: {"value": {"type": "plain_text_input", "value": v}} for k, v in shown.items()}
    assert ui_post(
        sandbox, "/ui/submit", {"user": "UALICE", "view_id": form["id"], "values": values}
    )["ok"]

    def bobs_card(s: dict[str, Any]) -> dict[str, Any] | None:
        dm = next(c for c in s["channels"] if c["id"] == "DBOB")
        return next((m for m in dm["messages"] if "Approve" in buttons(m)), None)

    raise_card = until(sandbox, bobs_card, "raise card in Bob's DM")
    assert "Raise the budget alice-daily" in raise_card["text"]
    click(sandbox, "UBOB", "DBOB", raise_card, "Approve")
    raised = wait_for(
        sandbox,
        lambda ms: any("Raised to" in m["text"] and "<@UBOB>" in m["text"] for m in ms),
        "pause card saying Bob raised it",
    )
    thread = next(m for m in raised if "Raised to" in m["text"])["thread_ts"]
    wait_for(
        sandbox,
        lambda ms: sum(m["user"] == "UBOT" and m.get("thread_ts") == thread for m in ms) >= 3,
        "resumed answer",
    )
    assert general(sandbox)
