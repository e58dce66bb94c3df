"""Live-reply benchmark: the bot in HTTP mode against the fakes, Slack's chat.update limit of
50 per minute enforced by the fake Slack.

    uv run python -m bench.stream            # 1 reply, then 20 concurrent replies
    uv run python -m bench.stream --replies 5 --tokens 100

Each reply is TOKENS tokens at RATE tokens/s after TTFT seconds to the first token. Times are
taken where they happen: first/last token when the fake model sends them, "visible" when the fake
Slack accepts the message or edit that shows the text.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import BOT_USER_ID, FakeSlack, Limit
from tests.harness import make_settings, start_bot, stop_bot

PLACEHOLDER = "_Thinking…_"


@dataclass
class ReplyFigures:
    event_to_placeholder: float
    first_token_to_visible: float
    last_token_to_complete: float
    updates: int
    exact: bool
    done_at: float


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def script_text(reply: int, tokens: int) -> str:
    return " ".join(f"r{reply}t{i}" for i in range(tokens))


async def run_scenario(
    replies: int,
    tokens: int,
    rate: float,
    ttft: float,
    budget_per_minute: int = 50,
    min_interval: float = 1.0,
) -> dict[str, float]:
    slack = FakeSlack().start()
    model = FakeOpenAI().start()
    slack.limits["chat.update"] = Limit(50, 60.0)
    slack.limits["chat.postMessage"] = Limit(60, 60.0, per_channel=True)
    texts = [script_text(i, tokens) for i in range(replies)]
    with tempfile.TemporaryDirectory() as tmp:
        bot = await start_bot(
            make_settings(
                slack,
                model,
                f"sqlite:///{Path(tmp) / 'bench.db'}",
                slack_edit_budget_per_minute=budget_per_minute,
                slack_edit_min_interval_seconds=min_interval,
            )
        )
        try:
            for i, t in enumerate(texts):
                model.script_for(
                    f"reply {i} please",
                    Script(text=t, time_to_first_token=ttft, tokens_per_second=rate),
                )
            sent_at: dict[str, float] = {}

            async def mention(i: int) -> None:
                channel = f"C{i:03d}"
                text = f"<@{BOT_USER_ID}> reply {i} please"
                ts = slack.add_user_message(channel, text)
                sent_at[channel] = time.monotonic()
                await bot.send_event(
                    {
                        "type": "app_mention",
                        "user": "UALICE",
                        "text": text,
                        "ts": ts,
                        "channel": channel,
                    }
                )

            started = time.monotonic()
            await asyncio.gather(*[mention(i) for i in range(replies)])
            await bot.idle(timeout=300)
            finished = time.monotonic()
        finally:
            await stop_bot(bot)
    figures: list[ReplyFigures] = []
    played = {p.text: p for p in model.played}
    for i in range(replies):
        channel = f"C{i:03d}"
        (message,) = slack.bot_messages(channel)
        timeline = slack.timeline[message.ts]
        stream = played[texts[i]]
        assert stream.first_token_at is not None
        assert stream.last_token_at is not None
        first_visible = next(t for t, text in timeline if text != PLACEHOLDER)
        complete = next((t for t, text in timeline if text == texts[i]), float("nan"))
        figures.append(
            ReplyFigures(
                event_to_placeholder=timeline[0][0] - sent_at[channel],
                first_token_to_visible=first_visible - stream.first_token_at,
                last_token_to_complete=complete - stream.last_token_at,
                updates=len(timeline) - 1,
                exact=message.text == texts[i],
                done_at=complete,
            )
        )
    updates = slack.calls_to("chat.update")
    slack.stop()
    model.stop()
    ms = 1000.0
    return {
        "replies": replies,
        "event -> placeholder p50 ms": pct([f.event_to_placeholder for f in figures], 0.5) * ms,
        "event -> placeholder p95 ms": pct([f.event_to_placeholder for f in figures], 0.95) * ms,
        "first token -> visible p50 ms": pct([f.first_token_to_visible for f in figures], 0.5) * ms,
        "first token -> visible p95 ms": pct([f.first_token_to_visible for f in figures], 0.95)
        * ms,
        "last token -> complete p50 ms": pct([f.last_token_to_complete for f in figures], 0.5) * ms,
        "last token -> complete p95 ms": pct([f.last_token_to_complete for f in figures], 0.95)
        * ms,
        "chat.update per reply (mean)": statistics.mean(f.updates for f in figures),
        "stream seconds per reply": tokens / rate,
        "429 answers": sum(1 for c in updates if c.status == 429),
        "exact final texts": sum(f.exact for f in figures),
        "all done after s": max(f.done_at for f in figures) - started,
        "wall s": finished - started,
    }


def report(name: str, figures: dict[str, float]) -> None:
    print(f"\n== {name}")
    for key, value in figures.items():
        shown = (
            f"{value:.0f}"
            if key in ("replies", "429 answers", "exact final texts")
            else (f"{value:.2f}" if isinstance(value, float) else str(value))
        )
        print(f"  {key:<34} {shown}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--replies", type=int, nargs="*", default=[1, 20])
    parser.add_argument("--tokens", type=int, default=400)
    parser.add_argument("--rate", type=float, default=40.0)
    parser.add_argument("--ttft", type=float, default=0.3)
    parser.add_argument(
        "--compare-unpaced",
        action="store_true",
        help="also run the largest scenario as a bot that edits twice a second and ignores "
        "the workspace budget (600/min configured against Slack's 50)",
    )
    args = parser.parse_args()
    for replies in args.replies:
        figures = await run_scenario(replies, args.tokens, args.rate, args.ttft)
        report(
            f"{replies} concurrent repl{'y' if replies == 1 else 'ies'}, {args.tokens} "
            f"tokens at {args.rate:g}/s, {args.ttft * 1000:.0f} ms to first token",
            figures,
        )
    if args.compare_unpaced:
        replies = max(args.replies)
        figures = await run_scenario(
            replies, args.tokens, args.rate, args.ttft, budget_per_minute=600, min_interval=0.5
        )
        report(f"UNPACED for comparison: {replies} replies, edits every 0.5 s", figures)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak RSS of the process (bot + both fakes): {peak:.0f} MiB")


if __name__ == "__main__":
    asyncio.run(main())
