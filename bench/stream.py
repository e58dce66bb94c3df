"""Live-reply benchmark: the bot in HTTP mode against the fakes, with Slack's budgets enforced
by the fake Slack at Slack's documented floors (chat.update 50/min, chat.startStream and
chat.stopStream 20/min each, chat.appendStream 100/min, chat.postMessage 60/min per channel).
The bot is not told the limits: it starts at the floors and learns from Slack's answers.
`--appends` sets what the fake Slack allows for chat.appendStream (the real limit is "100+").

    uv run python -m bench.stream --streaming auto      # 1, 20 and 60 concurrent replies
    uv run python -m bench.stream --streaming auto --replies 20 --appends 100 300 600
    uv run python -m bench.stream --streaming edit --replies 20
    uv run python -m bench.stream --replies 60 --bot in-process   # the bot beside the fakes

The bot runs as a process of its own (`countersign serve`, as in production) unless `--bot
in-process` puts it on this process's loop beside the fakes' threads (bench/stream_bots.py).
Every scenario starts with one warm-up conversation (its calls are not counted).

Each reply is TOKENS tokens at RATE tokens/s after TTFT seconds. Times are taken where they
happen: tokens when the fake model sends them, "visible" when the fake Slack accepts the call
that shows the text. The age of the shown text at a moment is how long ago the model had
produced what the reader sees; it is averaged over each reply's streaming time.

The bot's own cost (issue 28): "event -> model request" is from sending a reply's event to the
fake model receiving that reply's first request (matched by its prompt); "event -> first text"
is from the event to the fake Slack accepting the first call that shows words of the reply.
The bot's CPU per reply is the process's CPU over the wave less the fakes' threads'
(bench/bot_cost.py says how), divided by the replies; "RSS per concurrent reply" is the peak
growth of resident memory over the wave divided by the replies in flight.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from bench.bot_cost import first_requests
from bench.processes import pct
from bench.reply_figures import finished, reply_figures, script_text
from bench.stream_bots import InProcess, OwnProcess, fake_threads
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import BOT_USER_ID, FakeSlack, Limit

EDITS_PER_MINUTE = 50
STARTS_PER_MINUTE = 20
APPENDS_PER_MINUTE = 100  # Slack's documented floor; --appends changes what the fake allows


def limits_for(
    replies: int, rate: float, tokens: int, streaming: str, appends: int
) -> dict[str, float]:
    """What the budgets alone allow, as the mean age floor (half the refresh interval)."""
    stream_seconds = tokens / rate
    native = 0 if streaming == "edit" else min(replies, STARTS_PER_MINUTE)
    edited = replies - native
    out: dict[str, float] = {}
    if native:
        out["native refresh every s (budget)"] = max(0.5, 60 * native / appends)
    if edited:
        out["edit refresh every s (budget)"] = min(
            stream_seconds, max(1.0, 60 * edited / EDITS_PER_MINUTE)
        )
    floor = [v / 2 for v in out.values()]
    out["age floor s (budgets)"] = (
        (native * floor[0] + edited * floor[-1]) / replies if floor else float("nan")
    )
    return out


async def run_scenario(
    replies: int,
    tokens: int,
    rate: float,
    ttft: float,
    streaming: str,
    appends: int = APPENDS_PER_MINUTE,
    own_process: bool = False,
) -> dict[str, float]:
    before = {t.native_id for t in threading.enumerate()}
    slack = FakeSlack().start()
    model = FakeOpenAI().start()
    fakes = fake_threads(before)
    bot = OwnProcess() if own_process else InProcess(fakes)
    slack.limits["chat.update"] = Limit(EDITS_PER_MINUTE, 60.0)
    slack.limits["chat.postMessage"] = Limit(60, 60.0, per_channel=True)
    slack.limits["chat.startStream"] = Limit(STARTS_PER_MINUTE, 60.0)
    slack.limits["chat.stopStream"] = Limit(STARTS_PER_MINUTE, 60.0)
    slack.limits["chat.appendStream"] = Limit(appends, 60.0)
    texts = [script_text(i, tokens) for i in range(replies)]
    with tempfile.TemporaryDirectory() as tmp:
        try:
            await bot.start(slack, model, Path(tmp), streaming)  # the budgets: the floors
            for i, t in enumerate(texts):
                model.script_for(
                    f"reply {i} please",
                    Script(text=t, time_to_first_token=ttft, tokens_per_second=rate),
                )
            sent_at: dict[str, float] = {}

            async def mention(channel: str, prompt: str) -> None:
                text = f"<@{BOT_USER_ID}> {prompt}"
                ts = slack.add_user_message(channel, text)
                sent_at[channel] = time.monotonic()
                event = {"type": "app_mention", "user": "UALICE", "text": text, "ts": ts}
                await bot.send({**event, "channel": channel})

            model.script_for("warm up please", Script(text="Warm.", time_to_first_token=ttft))
            await mention("CWARM", "warm up please")
            await bot.idle(lambda: finished(slack, "CWARM", "Warm."), 60)
            counted_from = len(slack.calls)
            bot.measure()
            started = time.monotonic()
            await asyncio.gather(
                *[mention(f"C{i:03d}", f"reply {i} please") for i in range(replies)]
            )
            await bot.idle(
                lambda: all(finished(slack, f"C{i:03d}", texts[i]) for i in range(replies)), 600
            )
            finished_at = time.monotonic()
            bot_cpu, fakes_cpu, rss_growth = bot.measured()
            learned = bot.learned()
        finally:
            await bot.stop(Path(tmp))
    played = {p.text: p for p in model.played}
    figures = [
        reply_figures(slack, f"C{i:03d}", texts[i], played[texts[i]], sent_at[f"C{i:03d}"])
        for i in range(replies)
    ]
    asked = first_requests(model.requests, [f"reply {i} please" for i in range(replies)])
    to_model = [asked[i] - sent_at[f"C{i:03d}"] for i in range(replies)]
    measured = slack.calls[counted_from:]
    calls = Counter(c.method for c in measured if c.method.startswith("chat."))
    rate_limited = sum(1 for c in measured if c.status == 429)
    slack.stop()
    model.stop()
    ms = 1000.0
    out: dict[str, float] = {
        "replies": replies,
        "streamed natively": sum(f.native for f in figures),
        "event -> model request p50 ms": pct(to_model, 0.5) * ms,
        "event -> model request p95 ms": pct(to_model, 0.95) * ms,
        "event -> first text p50 ms": pct([f.event_to_visible for f in figures], 0.5) * ms,
        "event -> first text p95 ms": pct([f.event_to_visible for f in figures], 0.95) * ms,
        "first token -> first words max s": max(f.first_token_to_visible for f in figures),
        "age while streaming p50 s": pct([f.age_while_streaming for f in figures], 0.5),
        "age while streaming mean s": statistics.mean(f.age_while_streaming for f in figures),
        "age while streaming p95 s": pct([f.age_while_streaming for f in figures], 0.95),
        "last token -> complete p50 ms": pct([f.last_token_to_complete for f in figures], 0.5) * ms,
        "last token -> complete p95 ms": pct([f.last_token_to_complete for f in figures], 0.95)
        * ms,
        "exact final texts": sum(f.exact for f in figures),
        "429 answers": rate_limited,
        "stream seconds per reply": tokens / rate,
        "wall s": finished_at - started,
        "bot CPU per reply ms": bot_cpu / replies * ms,
        "fakes' CPU per reply ms": fakes_cpu / replies * ms,
        "RSS growth per concurrent reply MiB": rss_growth / replies,
    }
    for method in sorted(calls):
        out[f"calls {method}"] = calls[method]
    for method, limit in learned.items():
        out[f"learned {method} /min"] = limit
    out["fake Slack's appendStream /min"] = appends
    out.update(limits_for(replies, rate, tokens, streaming, appends))
    return out


def report(name: str, figures: dict[str, float]) -> None:
    print(f"\n== {name}")
    for key, value in figures.items():
        shown = (
            f"{value:.0f}"
            if key in ("replies", "429 answers", "exact final texts", "streamed natively")
            or key.startswith(("calls ", "learned ", "fake "))
            else (f"{value:.2f}" if isinstance(value, float) else str(value))
        )
        print(f"  {key:<34} {shown}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--streaming", choices=["auto", "native", "edit"], default="auto")
    parser.add_argument("--replies", type=int, nargs="*", default=[1, 20, 60])
    parser.add_argument("--tokens", type=int, default=400)
    parser.add_argument("--rate", type=float, default=40.0)
    parser.add_argument("--ttft", type=float, default=0.3)
    parser.add_argument(
        "--bot",
        choices=["process", "in-process"],
        default="process",
        help="the bot as a process of its own (as in production), or on this process's loop "
        "beside the fakes' threads (they share its interpreter lock)",
    )
    parser.add_argument(
        "--appends",
        type=int,
        nargs="*",
        default=[APPENDS_PER_MINUTE],
        help="what the fake Slack allows of chat.appendStream a minute (the bot is not told)",
    )
    args = parser.parse_args()
    for appends in args.appends:
        for replies in args.replies:
            figures = await run_scenario(
                replies,
                args.tokens,
                args.rate,
                args.ttft,
                args.streaming,
                appends,
                own_process=args.bot == "process",
            )
            report(
                f"STREAMING={args.streaming}: {replies} concurrent repl"
                f"{'y' if replies == 1 else 'ies'}, {args.tokens} tokens at {args.rate:g}/s, "
                f"{args.ttft * 1000:.0f} ms to first token; Slack allows {appends} appends/min; "
                f"bot {'in its own process' if args.bot == 'process' else 'in this process'}",
                figures,
            )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak RSS of this process (both fakes, and the bot if here): {peak:.0f} MiB")


if __name__ == "__main__":
    asyncio.run(main())
