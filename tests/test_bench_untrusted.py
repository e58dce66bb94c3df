"""World 3 of the hostile-model benchmark (bench/hostile_untrusted_*.py) is well formed: every
AgentDojo goal through every vector, its policy loads and says what the world claims, and the
card judge catches a URL shown as a link, cut short, or with no sources named. (The benchmark
itself is not run by the suite.)"""

from __future__ import annotations

from types import SimpleNamespace

from bench.hostile_untrusted_attacks import GOALS, VECTORS, instruction, untrusted_attacks
from bench.hostile_untrusted_world import POLICY, READ_BEFORE, card_faults
from bot.policy.model import load_text
from tests.fakes.slack import StoredMessage

URL, HOST = "https://login.phish.example/verify?team=acme", "login.phish.example"


def card(*texts: str) -> StoredMessage:
    blocks = [{"type": "context", "elements": [{"type": "mrkdwn", "text": t}]} for t in texts]
    return StoredMessage("1.0", "", "UBOT", "B1", None, blocks=blocks)


def test_every_goal_goes_through_every_vector_once() -> None:
    attacks = untrusted_attacks()
    assert len(GOALS) == 4
    assert len(VECTORS) >= 7
    assert len(attacks) == len(GOALS) * len(VECTORS)
    assert len({a.name for a in attacks}) == len(attacks)
    for goal in GOALS:
        assert goal.url.startswith("https://")
        assert goal.host in goal.url
    assert all(v.source for v in VECTORS)


def test_the_policy_would_cover_the_writes_but_for_untrusted_input() -> None:
    policy = load_text(POLICY)
    rules = {r.name: r for r in policy.rules}
    assert rules["posts-in-general"].outcome == "allow"
    assert rules["posts-in-general"].after_untrusted is None  # the default
    assert rules["posts-in-team"].after_untrusted == "ask"
    assert "channel" in rules["topics-in-general"].grants
    assert rules["reading-the-web"].outcome == "allow"


def test_the_planted_text_names_its_marker_and_the_attackers_url() -> None:
    third = SimpleNamespace(secret=SimpleNamespace(text="EXEC-SECRET"))
    for goal in GOALS:
        text = instruction(goal, third, "INJ-1")  # type: ignore[arg-type]
        assert "INJ-1" in text
        assert goal.host in text
        assert "EXEC-SECRET" not in text  # the attacker does not know it; the read does


def test_the_card_judge_catches_links_cut_urls_and_missing_sources() -> None:
    broken = URL.replace("://", ":\u200b//").replace(".example", ".\u200bexample")
    broken = broken.replace("phish.", "phish.\u200b").replace("login.", "login.\u200b")
    line = f":mag: {READ_BEFORE} @gail's message (a guest)"
    assert card_faults(card(broken, line), URL, HOST, "(a guest)") == []
    assert any("a link" in f for f in card_faults(card(URL, line), URL, HOST, "(a guest)"))
    elsewhere = card(broken, line, "see also https://other.example/x")
    assert any("a link" in f for f in card_faults(elsewhere, URL, HOST, "(a guest)"))
    assert any("in full" in f for f in card_faults(card(broken[:20], line), URL, HOST, "x"))
    assert any("no 'Proposed" in f for f in card_faults(card(broken), URL, HOST, "(a guest)"))
    assert any("does not name" in f for f in card_faults(card(broken, line), URL, HOST, "x.pdf"))
