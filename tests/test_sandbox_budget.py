"""The sandbox shows a budget (issue 29): Alice's small daily budget is used up within three
questions to the demo model, her thread shows the pause card ("Continue on a cheaper model",
"Ask to raise"), continuing resumes her turn on the demo's cheaper model, and `/usage` shows
the budget to her and to Bob, its owner. Driven as the page drives it (its routes), against
the unchanged bot as a process."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.sandbox_browser import running_sandbox, state, ui_post

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def sandbox() -> Iterator[str]:
    with running_sandbox(SANDBOX_DEMO_BUDGET="on") as (base, _process):
        yield base


def general(base: str) -> list[dict[str, Any]]:
    found = next(c for c in state(base)["channels"] if c["id"] == "C0GENERAL")
    return list(found["messages"])


def wait_for(base: str, ready: Any, what: str) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        messages = general(base)
        if ready(messages):
            return messages
        time.sleep(0.1)
    raise AssertionError(f"no {what}")


def cards(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if str(m.get("text", "")).startswith("Budget reached")]


def answered(messages: list[dict[str, Any]], root: str) -> bool:
    return any(
        m["user"] == "UBOT" and m.get("thread_ts") == root and not m.get("streaming")
        for m in messages
    )


def test_alices_demo_budget_pauses_her_and_the_cheaper_model_goes_on(sandbox: str) -> None:
    for n in range(1, 4):
        said = {"user": "UALICE", "channel": "C0GENERAL", "text": f"<@UBOT> hello {n}"}
        root = str(ui_post(sandbox, "/ui/message", said)["ts"])
        messages = wait_for(sandbox, lambda ms, r=root: answered(ms, r), "answer")
        if cards(messages):
            break
    wait_for(sandbox, cards, "pause card")
    [card] = cards(general(sandbox))
    assert card["text"].startswith("Budget reached: alice-daily, ")
    # What a reply being written still holds is counted and named: "(94 tokens held by …)".
    assert re.search(r"of 8,000 tokens( \([^)]*\))? today; resets", card["text"])
    buttons = [e for b in card["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert [b["text"]["text"] for b in buttons] == ["Continue on a cheaper model", "Ask to raise"]
    ui_post(
        sandbox,
        "/ui/action",
        {
            "user": "UALICE",
            "channel": "C0GENERAL",
            "ts": card["ts"],
            "action_id": buttons[0]["action_id"],
            "value": buttons[0]["value"],
        },
    )
    chosen = wait_for(
        sandbox,
        lambda ms: any("chosen by" in m["text"] for m in cards(ms)),
        "card saying who chose the cheaper model",
    )
    assert "Continuing on countersign-demo-mini" in cards(chosen)[0]["text"]
    thread = card["thread_ts"]

    def resumed_answer(ms: list[dict[str, Any]]) -> bool:
        # The paused reply is the card itself; the resumed turn answers under it.
        return any(
            m["user"] == "UBOT"
            and m.get("thread_ts") == thread
            and m["ts"] != card["ts"]
            and not m.get("streaming")
            for m in ms
        )

    wait_for(sandbox, resumed_answer, "resumed answer")


def usage_for(base: str, user: str) -> str:
    """`/usage` typed in #general: the private answer `user` sees there."""
    seen = len([m for m in general(base) if m.get("visible_to") == user])
    ui_post(base, "/ui/message", {"user": user, "channel": "C0GENERAL", "text": "/usage"})
    messages = wait_for(
        base,
        lambda ms: len([m for m in ms if m.get("visible_to") == user]) > seen,
        f"/usage answer for {user}",
    )
    answer = [m for m in messages if m.get("visible_to") == user][-1]
    return json.dumps(answer.get("blocks"), ensure_ascii=False)


def test_usage_shows_alice_her_budget_and_bob_the_one_he_owns(sandbox: str) -> None:
    """After the test above used Alice's budget: she sees it in /usage; Bob owns it."""
    alices = usage_for(sandbox, "UALICE")
    assert "*Your usage*" in alices
    held = r"( \([^)]*held by replies being written\))?"  # a reply may still be written
    assert re.search(rf"alice-daily, [\d,]+ of 8,000 tokens{held} today; resets 00:00", alices)
    assert "raised by <@UBOB>" in alices
    bobs = usage_for(sandbox, "UBOB")
    assert "No spending limits apply to you here." in bobs
    assert "*Budgets you own*" in bobs
    assert "alice-daily" in bobs
