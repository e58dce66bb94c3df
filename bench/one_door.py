"""The one-door model-based test (issue 25), run longer than the suite does.

    uv run python -m bench.one_door --sequences 2000
    uv run python -m bench.one_door --sequences 500 --seed 7 --shrink

The same machine as tests/test_one_door_model.py (the real bot on SQLite with the fake Slack and
model, beside the reference model of tests/one_door_reference.py), over SEQUENCES random
sequences of up to STEPS steps. Violations are counted by kind rather than stopping the run.
Printed: sequences, steps, writes judged, messages checked, the liveness checks met, the
violations of each kind with the shortest sequence seen for it, and the run's time. With
`--shrink`, each kind found is then looked for again (same seed) with hypothesis shrinking
it, and the shrunk sequence is printed too.
"""

from __future__ import annotations

import argparse
import logging
import time

from hypothesis import HealthCheck, Phase, seed, settings
from hypothesis.errors import HypothesisException
from hypothesis.stateful import run_state_machine_as_test

from tests.one_door_bot import OneDoorBot
from tests.one_door_findings import Figures, Finding
from tests.one_door_machine import one_door_machine
from tests.one_door_policy import Policy


def explore(
    bot: OneDoorBot,
    sequences: int,
    steps: int,
    seed_value: int,
    fails: str | None = None,
) -> tuple[Figures, str | None]:
    """Run `sequences` sequences; with `fails` (a kind), stop at it and shrink it. Returns the
    figures and the shrunk failure's text, if any."""
    figures = Figures()

    def failing(finding: Finding) -> bool:
        return fails is not None and finding.kind == fails

    machine = one_door_machine(bot, figures, fails=failing, restarts=True)
    seed(seed_value)(machine)
    phases = [Phase.generate] + ([Phase.shrink] if fails else [])
    shrunk = None
    try:
        run_state_machine_as_test(
            machine,
            settings=settings(
                max_examples=sequences,
                stateful_step_count=steps,
                deadline=None,
                database=None,
                phases=phases,
                suppress_health_check=list(HealthCheck),
                report_multiple_bugs=False,
            ),
        )
    except AssertionError as exc:
        shrunk = str(exc)
    except HypothesisException as exc:  # e.g. flaky: report, keep going
        shrunk = f"(hypothesis: {exc})"
    return figures, shrunk


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sequences", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--seed", type=int, default=25_000)
    parser.add_argument("--shrink", action="store_true", help="shrink each kind found")
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)  # the bot logs the failures the run provokes
    bot = OneDoorBot.open(Policy("ask", ()).text(1))
    started = time.monotonic()
    try:
        figures, _ = explore(bot, args.sequences, args.steps, args.seed)
        elapsed = time.monotonic() - started
        print(f"sequences            {figures.sequences}")
        print(f"steps                {figures.steps}")
        print(f"writes judged        {figures.writes_judged}")
        print(f"messages checked     {figures.messages_checked}")
        print(f"liveness checks met  {figures.liveness_met} of {figures.liveness_expected}")
        print(f"bot restarts         {bot.restarts}")
        total = sum(len(found) for found in figures.findings.values())
        print(f"violations found     {total} ({len(figures.findings)} kinds)")
        print(f"seconds              {elapsed:.1f}")
        for kind, found in sorted(figures.findings.items(), key=lambda kv: -len(kv[1])):
            shortest = figures.shortest(kind)
            print(f"\n== {len(found)} x {kind}\n{shortest.detail}\nshortest sequence seen:")
            print(shortest.story)
        if args.shrink:
            for kind in sorted(figures.findings):
                _, shrunk = explore(bot, args.sequences, args.steps, args.seed, fails=kind)
                print(f"\n== shrunk: {kind}\n{shrunk or '(not found again)'}")
    finally:
        bot.close()


if __name__ == "__main__":
    main()
