"""The policy bench (bench/policy.py) runs end to end at a tiny size: the proposal path in its
configurations and the replay of a recorded week, so the figures in docs/benchmarks.md stay
reproducible."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from bench.policy import latency, policy_text, replay
from bot.policy.model import load_text


def test_the_generated_policy_has_its_rules_and_ends_in_an_ask_with_grants() -> None:
    policy = load_text(policy_text(200, 10))
    assert len(policy.rules) == 200
    assert sum(r.tools == ["create_task"] for r in policy.rules) == 10
    assert policy.rules[-1].outcome == "ask"
    assert policy.rules[-1].grants


async def test_the_policy_bench_runs_at_a_tiny_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = argparse.Namespace(rounds=2, warmup=1, rules=12, relevant=3, grants=30)
    await latency(f"sqlite:///{tmp_path / 'latency.db'}", "SQLite", args, tmp_path)
    await replay(f"sqlite:///{tmp_path / 'replay.db'}", "SQLite", 40, tmp_path, cli=False)
    out = capsys.readouterr().out
    assert "no policy" in out
    assert "12 rules (3 on it), 30 grants: a grant covers it" in out
    assert "40 decisions:" in out
