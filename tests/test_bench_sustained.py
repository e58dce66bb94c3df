"""The sustained-load bench (bench/sustained.py) runs end to end at a tiny size against a bot in
this process: Poisson arrivals, every reply read from the fakes' records, and Slack's calls and
429 answers counted per method, so the figures in docs/benchmarks.md stay reproducible."""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path

import pytest

from bench.sustained import Plan, make_plan, measure, poisson_arrivals, report
from tests.fakes.openai import FakeOpenAI
from tests.fakes.slack import FakeSlack, Limit, documented_floors
from tests.harness import make_settings, start_bot, stop_bot


def test_arrivals_are_seeded_sorted_and_inside_the_window() -> None:
    first = poisson_arrivals(200, 60.0, seed=3)
    assert first == poisson_arrivals(200, 60.0, seed=3)
    assert first != poisson_arrivals(200, 60.0, seed=4)
    assert len(first) == 200
    assert first == sorted(first)
    assert first[0] > 0.0
    assert first[-1] < 60.0
    gaps = [b - a for a, b in zip([0.0, *first], first, strict=False)]
    # exponential gaps: their spread is about their mean (a fixed cadence would have none)
    mean = sum(gaps) / len(gaps)
    spread = (sum((g - mean) ** 2 for g in gaps) / len(gaps)) ** 0.5
    assert 0.6 * mean < spread < 1.5 * mean


async def test_the_bench_reads_finals_and_429s_from_the_fakes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    slack = FakeSlack(limits=documented_floors()).start()
    model = FakeOpenAI().start()
    # One method held far below its floor, so that the table must show Slack's 429s.
    slack.limits["agents.sessions.setStatus"] = Limit(2, 60.0)
    plan: Plan = make_plan(5, 1.0, seed=1, tokens=8, rate=80.0, ttft=0.05)
    bot = await start_bot(
        make_settings(slack, model, f"sqlite:///{tmp_path / 'b.db'}", streaming="auto")
    )
    try:
        outcome = await measure([bot], slack, model, plan, drain=20.0, quiet=0.5)
    finally:
        await stop_bot(bot)
        slack.stop()
        model.stop()
    assert outcome.conversations == outcome.answered == outcome.exact == 5
    assert outcome.unfinished == 0
    for i, text in enumerate(plan.texts):
        shown = " ".join(m.text for m in slack.bot_messages(plan.channel(i)))
        assert shown.split() == text.split()
    # Counted from the fake Slack's records after the warm-up; the held-down method was refused.
    counted = sum(outcome.calls.values())
    measured = slack.calls[outcome.counted_from : outcome.counted_from + counted]
    assert 0 < outcome.counted_from < len(slack.calls)
    assert outcome.calls == Counter(c.method for c in measured)
    assert outcome.refused == Counter(c.method for c in measured if c.status == 429)
    assert any(c.status == 429 for c in slack.calls)
    assert all(map(math.isfinite, outcome.final + outcome.first_words + outcome.event_to_words))
    report("tiny", outcome, [])
    out = capsys.readouterr().out
    assert "finals exact                        5 / 5" in out
    for method, calls in outcome.calls.items():
        row = re.search(rf"{re.escape(method)} +(\d+) +(\d+)", out)
        assert row is not None
        assert (int(row[1]), int(row[2])) == (calls, outcome.refused[method])
