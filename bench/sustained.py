"""Sustained load (issue 28): conversations arriving one after another for a minute, not all at
once, against the fakes at Slack's documented floors.

    uv run python -m bench.sustained                  # one process (SQLite), then 3 replicas
    uv run python -m bench.sustained --only one --conversations 200 --seconds 60 --seed 1
    uv run python -m bench.sustained --only replicas

CONVERSATIONS conversations arrive over SECONDS as a Poisson process (seeded): each is a person
mentioning the bot in a channel of its own (a new conversation at the top of a channel, the
common case; no threads or DMs), sent as a signed Events API request to a real
`countersign serve` process: one with SQLite, or three replicas sharing PostgreSQL and Redis
(their budgets for the workspace are shared through Redis), the events spread round-robin. Each
reply is TOKENS tokens at RATE tokens/s after TTFT seconds. The fake Slack enforces the floors
of `documented_floors()` and answers 429 with Retry-After beyond them; the bot is not told them.
Each process first answers one warm-up conversation (its calls are not counted, but they are in
Slack's sliding minute). After the last arrival the replies get DRAIN seconds to finish.

Figures, read from the fakes' records the way `bench/stream.py` reads them (`reply_figures`):
finals exact (target N/N), last token -> exact final shown p95 (target <= 2 s), first token ->
first words shown p95 (target <= 3 s), event -> first words p50/p95, Slack's calls and 429
answers per method (target 0 on every method), peak RSS, wall time (first arrival to the last
exact final) and the load average at the start (other work on the machine moves every figure).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import random
import resource
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import aiohttp

from bench.processes import bot_env, pct, start_processes, stop_processes
from bench.reply_figures import finished, reply_figures, script_text
from bench.reply_ways import Ways, read_ways
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack, Limit, documented_floors
from tests.harness import SlackFront
from tests.pg import temporary_database

# A Redis database of its own (flushed at the start): not the tests' (15) nor bench/load's (14)
REDIS_URL = os.environ.get("SUSTAINED_REDIS_URL", "redis://127.0.0.1:6379/12")
FINAL_TARGET = 2.0  # s, last token -> exact final shown, p95
FIRST_WORDS_TARGET = 3.0  # s, first token -> first words shown, p95
QUIET = 2.0  # s without a Slack call after the last final: the trailing calls are counted
WARM_PROMPT, WARM_TEXT = "warm up please", "Warm."


@dataclass(frozen=True)
class Plan:
    """Who arrives when (seconds after the start) and what the model answers each one."""

    arrivals: list[float]
    texts: list[str]
    ttft: float
    rate: float

    @staticmethod
    def channel(i: int) -> str:
        return f"CS{i:04d}"

    @staticmethod
    def prompt(i: int) -> str:
        return f"sustained {i} please"

    def script(self, model: FakeOpenAI) -> None:
        for i, text in enumerate(self.texts):
            model.script_for(
                self.prompt(i),
                Script(text=text, time_to_first_token=self.ttft, tokens_per_second=self.rate),
            )
        model.script_for(WARM_PROMPT, Script(text=WARM_TEXT, time_to_first_token=self.ttft))


def poisson_arrivals(count: int, seconds: float, seed: int) -> list[float]:
    """`count` arrival times in [0, seconds) of a Poisson process: exponential gaps (seeded), the
    partial sums of count + 1 of them scaled so that the one after the last would fall at
    `seconds`. Scaled so, they are distributed as a Poisson process's arrivals given that
    `count` fall in the window, and the run lasts the window whatever the draw."""
    rng = random.Random(seed)
    gaps = [rng.expovariate(1.0) for _ in range(count + 1)]
    total, at, out = sum(gaps), 0.0, []
    for gap in gaps[:-1]:
        at += gap
        out.append(seconds * at / total)
    return out


def make_plan(count: int, seconds: float, seed: int, tokens: int, rate: float, ttft: float) -> Plan:
    texts = [script_text(i, tokens) for i in range(count)]
    return Plan(poisson_arrivals(count, seconds, seed), texts, ttft, rate)


@dataclass
class Outcome:
    """What a run measured: per-reply figures in seconds, Slack's calls and 429s per method."""

    conversations: int
    answered: int = 0  # replies whose model stream was played whole
    exact: int = 0
    final: list[float] = field(default_factory=list)  # last token -> exact final shown
    first_words: list[float] = field(default_factory=list)  # first token -> first words
    event_to_words: list[float] = field(default_factory=list)
    calls: Counter[str] = field(default_factory=Counter)
    refused: Counter[str] = field(default_factory=Counter)  # HTTP 429 answers
    wall: float = math.nan  # first arrival -> last reply finished (NaN: not all did)
    unfinished: int = 0  # replies not finished when the drain ran out
    drain: float = math.nan
    counted_from: int = 0  # the fake Slack's first call counted (the warm-ups' are not)
    ways: Ways = field(default_factory=Ways)  # how the replies went (bench/reply_ways.py)


def late(value: float) -> float:
    """A figure that never happened (NaN) counts as infinitely late in a percentile."""
    return math.inf if math.isnan(value) else value


def read_outcome(
    slack: FakeSlack, model: FakeOpenAI, plan: Plan, sent_at: dict[int, float], counted_from: int
) -> Outcome:
    outcome = Outcome(len(plan.texts), counted_from=counted_from)
    played = {p.text: p for p in model.played if p.last_token_at is not None}
    for i, text in enumerate(plan.texts):
        stream = played.get(text)
        if stream is None or i not in sent_at:
            outcome.final.append(math.inf)
            outcome.first_words.append(math.inf)
            outcome.event_to_words.append(math.inf)
            continue
        reply = reply_figures(slack, plan.channel(i), text, stream, sent_at[i])
        outcome.answered += 1
        outcome.exact += reply.exact
        outcome.final.append(late(reply.last_token_to_complete))
        outcome.first_words.append(late(reply.first_token_to_visible))
        outcome.event_to_words.append(late(reply.event_to_visible))
    with slack._lock:
        measured = slack.calls[counted_from:]
    outcome.calls = Counter(c.method for c in measured)
    outcome.refused = Counter(c.method for c in measured if c.status == 429)
    channels = [plan.channel(i) for i in range(len(plan.texts))]
    last_tokens = [
        stream.last_token_at if (stream := played.get(text)) is not None else None
        for text in plan.texts
    ]
    outcome.ways = read_ways(
        measured, channels, outcome.final, outcome.first_words, last_tokens, FINAL_TARGET
    )
    return outcome


async def settle(predicate: Callable[[], bool], deadline: float) -> bool:
    """Poll `predicate` until it holds or the deadline passes."""
    while not predicate():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.25)
    return True


async def measure(
    fronts: list[SlackFront],
    slack: FakeSlack,
    model: FakeOpenAI,
    plan: Plan,
    drain: float,
    quiet: float = QUIET,
) -> Outcome:
    """Warm each bot up, send the plan's mentions at their arrival times (round-robin over
    `fronts`), wait for every exact final (at most `drain` s after the last arrival) and for
    Slack to hear nothing for `quiet` s, and read the outcome from the fakes."""
    plan.script(model)
    for k, front in enumerate(fronts):
        warm = f"CWARM{k}"
        await front.mention(warm, WARM_PROMPT, slack)
        await settle(partial(finished, slack, warm, WARM_TEXT), time.monotonic() + 60)
    counted_from = len(slack.calls)
    sent_at: dict[int, float] = {}
    start = time.monotonic()

    async def arrive(i: int) -> None:
        await asyncio.sleep(max(0.0, start + plan.arrivals[i] - time.monotonic()))
        sent_at[i] = time.monotonic()
        await fronts[i % len(fronts)].mention(plan.channel(i), plan.prompt(i), slack)

    await asyncio.gather(*(arrive(i) for i in range(len(plan.texts))))
    deadline = time.monotonic() + drain
    pending = set(range(len(plan.texts)))

    def all_done() -> bool:
        pending.difference_update(
            [i for i in pending if finished(slack, plan.channel(i), plan.texts[i])]
        )
        return not pending

    done = await settle(all_done, deadline)
    ended = time.monotonic()

    def silent() -> bool:
        return time.monotonic() - max((c.at for c in slack.calls[-1:]), default=0.0) > quiet

    await settle(silent, max(deadline, ended + 10))
    outcome = read_outcome(slack, model, plan, sent_at, counted_from)
    outcome.wall = ended - (start + plan.arrivals[0]) if done and plan.arrivals else math.nan
    outcome.unfinished, outcome.drain = len(pending), drain
    return outcome


def report(label: str, outcome: Outcome, lines: list[str]) -> None:
    """Print the figures against their targets and the calls and 429s of every method."""
    n = outcome.conversations
    print(f"\n== {label}")
    for line in lines:
        print(f"  {line}")
    print(f"  finals exact                        {outcome.exact} / {n}   (target {n} / {n})")
    print(f"  model streams played whole          {outcome.answered} / {n}")
    print(
        f"  last token -> exact final shown     p50 {pct(outcome.final, 0.5):6.2f} s"
        f"   p95 {pct(outcome.final, 0.95):6.2f} s   (target p95 <= {FINAL_TARGET:g} s)"
    )
    print(
        f"  first token -> first words shown    p50 {pct(outcome.first_words, 0.5):6.2f} s"
        f"   p95 {pct(outcome.first_words, 0.95):6.2f} s"
        f"   (target p95 <= {FIRST_WORDS_TARGET:g} s)"
    )
    print(
        f"  event -> first words shown          p50 {pct(outcome.event_to_words, 0.5):6.2f} s"
        f"   p95 {pct(outcome.event_to_words, 0.95):6.2f} s"
    )
    print(f"  429 answers, all methods            {sum(outcome.refused.values())}   (target 0)")
    if outcome.unfinished:
        print(
            f"  wall (first arrival -> last final)  {outcome.unfinished} replies not finished "
            f"{outcome.drain:g} s after the last arrival"
        )
    else:
        print(f"  wall (first arrival -> last final)  {outcome.wall:6.1f} s")
    for line in outcome.ways.lines(FINAL_TARGET):
        print(f"  {line}")
    print(f"  {'method':<38} {'calls':>6} {'429':>5}")
    for method in sorted(outcome.calls):
        print(f"  {method:<38} {outcome.calls[method]:>6} {outcome.refused[method]:>5}")


def finals_allowed(args: argparse.Namespace) -> int:
    """How many replies can end within the run if each ends with a chat.update (a reply sent as
    edits) or a chat.stopStream (a native stream, which starts when its conversation arrives:
    at most the chat.startStream floor per minute of arrivals). Slack's floors, not the bot,
    bound this; a reply that ends some other way (say, the rest in a new post) is not bounded."""
    floors = documented_floors()

    def per_minute(method: str) -> float:
        limit = floors[method]
        assert isinstance(limit, Limit)  # a per-workspace limit (not per channel as well)
        return limit.calls * 60 / limit.per_seconds

    streams = per_minute("chat.startStream") * max(1.0, args.seconds / 60)
    return int(streams + per_minute("chat.update") * (args.seconds + args.drain) / 60)


async def run(
    label: str, replicas: int, database_url: str, redis_url: str | None, args: argparse.Namespace
) -> None:
    load = os.getloadavg()
    slack = FakeSlack(limits=documented_floors()).start()
    model = FakeOpenAI().start()
    plan = make_plan(args.conversations, args.seconds, args.seed, args.tokens, args.rate, args.ttft)
    with tempfile.TemporaryDirectory() as tmp:
        processes = await start_processes(
            replicas, bot_env(slack, model, database_url, redis_url), Path(tmp)
        )
        try:
            async with aiohttp.ClientSession() as session:
                fronts = [SlackFront(f"http://127.0.0.1:{port}", session) for _, port in processes]
                outcome = await measure(fronts, slack, model, plan, args.drain)
        finally:
            rss, errors = stop_processes(processes, Path(tmp))
    slack.stop()
    model.stop()
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    report(
        f"{label}: {args.conversations} conversations over {args.seconds:g} s (Poisson, seed "
        f"{args.seed}), {args.tokens} tokens at {args.rate:g}/s after {args.ttft * 1000:.0f} ms",
        outcome,
        [
            "load average at start (1/5/15 min)  " + " / ".join(f"{v:.2f}" for v in load),
            "peak RSS per bot process            " + ", ".join(f"{r:.0f} MB" for r in rss),
            f"peak RSS of the bench (both fakes)  {own:.0f} MB",
            f"ERROR log lines                     {len(errors)}",
            f"{f'finals the floors allow in {args.seconds + args.drain:g} s':<36}"
            f"{finals_allowed(args)}   (if each ends with a chat.update or a native stream)",
            *(f"  ERROR {line.split(' ERROR ', 1)[1][:160]}" for line in errors[:5]),
        ],
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--tokens", type=int, default=400)
    parser.add_argument("--rate", type=float, default=40.0)
    parser.add_argument("--ttft", type=float, default=0.3)
    parser.add_argument("--drain", type=float, default=120)
    parser.add_argument("--only", choices=["one", "replicas"], default=None)
    args = parser.parse_args()
    if args.only in (None, "one"):
        with tempfile.TemporaryDirectory() as tmp:
            await run("one process, SQLite", 1, f"sqlite:///{Path(tmp) / 'load.db'}", None, args)
    if args.only in (None, "replicas"):
        from redis.asyncio import Redis

        redis = Redis.from_url(REDIS_URL)
        await redis.flushdb()
        await redis.aclose()
        async with temporary_database("cs_sustained") as url:
            await run("three replicas, PostgreSQL + Redis", 3, url, REDIS_URL, args)


if __name__ == "__main__":
    asyncio.run(main())
