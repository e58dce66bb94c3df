"""Live-reply benchmark: the bot in HTTP mode against the fakes, with Slack's budgets enforced
by the fake Slack at Slack's documented floors (chat.update 50/min, chat.startStream and
chat.stopStream 20/min each, chat.appendStream 100/min, chat.postMessage 60/min per channel).
The bot is not told the limits: it starts at the floors and learns from Slack's answers.
`--appends` sets what the fake Slack allows for chat.appendStream (the real limit is "100+").

    uv run python -m bench.stream --streaming auto      # 1, 20 and 60 concurrent replies
    uv run python -m bench.stream --streaming auto --replies 20 --appends 100 300 600
    uv run python -m bench.stream --streaming edit --replies 20

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
import bisect
import resource
import statistics
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from bench.bot_cost import CostMeter, first_requests
from tests.fakes.openai import FakeOpenAI, Played, Script
from tests.fakes.slack import BOT_USER_ID, FakeSlack, Limit
from tests.harness import make_settings, start_bot, stop_bot

PLACEHOLDER = "_Thinking…_"
CURSOR = " ▍"
EDITS_PER_MINUTE = 50
STARTS_PER_MINUTE = 20
APPENDS_PER_MINUTE = 100  # Slack's documented floor; --appends changes what the fake allows


@dataclass
class ReplyFigures:
    event_to_visible: float
    first_token_to_visible: float
    age_while_streaming: float
    last_token_to_complete: float
    exact: bool
    native: bool


def shown_length(text: str, final: str) -> int:
    """How much of the final text a shown text has (placeholder and cursor removed)."""
    body = text.removesuffix(CURSOR).split("\n_", 1)[0]
    if body == PLACEHOLDER:
        return 0
    length = 0
    for a, b in zip(body, final, strict=False):
        if a != b:
            break
        length += 1
    return length


def mean_age(timeline: list[tuple[float, str]], final: str, played: Played) -> float:
    """Time-weighted mean, over [first token, last token], of how far behind the model the
    reader is: now minus the moment the model had produced what is shown."""
    assert played.first_token_at is not None
    assert played.last_token_at is not None
    times = [t for t, _ in played.token_times]
    produced = [n for _, n in played.token_times]
    begin, end = played.first_token_at, played.last_token_at
    shown_at = [t for t, _ in timeline]
    lengths = [shown_length(text, final) for _, text in timeline]
    total, step, now = 0.0, 0.005, begin
    while now < end:
        index = bisect.bisect_right(shown_at, now) - 1
        length = lengths[index] if index >= 0 else 0
        # the moment the model had produced `length` characters
        k = bisect.bisect_left(produced, length)
        made_at = times[min(k, len(times) - 1)] if length else begin
        total += (now - made_at) * step
        now += step
    return total / max(end - begin, step)


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def script_text(reply: int, tokens: int) -> str:
    return " ".join(f"r{reply}t{i}" for i in range(tokens))


def combined_timeline(slack: FakeSlack, channel: str) -> list[tuple[float, str]]:
    """What a reader of the channel saw over time: the reply's messages, read in order, as one
    text (a reply may go on in a second message)."""
    messages = slack.bot_messages(channel)
    moments = sorted({at for m in messages for at, _ in slack.timeline[m.ts]})
    out = []
    for moment in moments:
        shown = []
        for message in messages:
            seen = [t for at, t in slack.timeline[message.ts] if at <= moment]
            text = seen[-1] if seen else ""
            shown.append(text.removesuffix(CURSOR) if text != PLACEHOLDER else "")
        out.append((moment, " ".join(t for t in shown if t)))
    return out


def reply_figures(
    slack: FakeSlack, channel: str, final: str, stream: Played, sent_at: float
) -> ReplyFigures:
    """One reply's figures, read from the fakes' records: what the channel showed and when
    (the fake Slack), when the model sent its tokens (the fake model), the event sent at
    `sent_at`. A reply that never showed words or its exact final has NaN there."""
    messages = slack.bot_messages(channel)
    timeline = combined_timeline(slack, channel)
    assert stream.last_token_at is not None
    assert stream.first_token_at is not None
    first_visible = next((t for t, text in timeline if shown_length(text, final) > 0), float("nan"))
    words = final.split()
    complete = next((t for t, text in timeline if text.split() == words), float("nan"))
    return ReplyFigures(
        event_to_visible=first_visible - sent_at,
        first_token_to_visible=first_visible - stream.first_token_at,
        age_while_streaming=mean_age(timeline, final, stream),
        last_token_to_complete=complete - stream.last_token_at,
        exact=" ".join(m.text for m in messages).split() == words,
        native=bool(messages) and messages[0].ts in slack.streams,
    )


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
) -> dict[str, float]:
    before = {t.native_id for t in threading.enumerate()}
    slack = FakeSlack().start()
    model = FakeOpenAI().start()
    fakes = [t.native_id for t in threading.enumerate() if t.native_id not in before]
    slack.limits["chat.update"] = Limit(EDITS_PER_MINUTE, 60.0)
    slack.limits["chat.postMessage"] = Limit(60, 60.0, per_channel=True)
    slack.limits["chat.startStream"] = Limit(STARTS_PER_MINUTE, 60.0)
    slack.limits["chat.stopStream"] = Limit(STARTS_PER_MINUTE, 60.0)
    slack.limits["chat.appendStream"] = Limit(appends, 60.0)
    texts = [script_text(i, tokens) for i in range(replies)]
    with tempfile.TemporaryDirectory() as tmp:
        bot = await start_bot(
            make_settings(
                slack,
                model,
                f"sqlite:///{Path(tmp) / 'bench.db'}",
                streaming=streaming,  # the budgets: the bot's defaults, the floors
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

            model.script_for("warm up please", Script(text="Warm.", time_to_first_token=ttft))
            warm = slack.add_user_message("CWARM", f"<@{BOT_USER_ID}> warm up please")
            await bot.send_event(
                {
                    "type": "app_mention",
                    "user": "UALICE",
                    "text": f"<@{BOT_USER_ID}> warm up please",
                    "ts": warm,
                    "channel": "CWARM",
                }
            )
            await bot.idle(timeout=60)
            counted_from = len(slack.calls)
            meter = CostMeter([t for t in fakes if t is not None])
            meter.start()
            started = time.monotonic()
            await asyncio.gather(*[mention(i) for i in range(replies)])
            await bot.idle(timeout=600)
            finished = time.monotonic()
            bot_cpu, fakes_cpu, rss_growth = meter.stop()
            budgets = bot.countersign.budgets
            learned = {
                m: r.limit for m, r in (budgets.learned.items() if budgets is not None else [])
            }
        finally:
            await stop_bot(bot)
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
        "wall s": finished - started,
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
                replies, args.tokens, args.rate, args.ttft, args.streaming, appends
            )
            report(
                f"STREAMING={args.streaming}: {replies} concurrent repl"
                f"{'y' if replies == 1 else 'ies'}, {args.tokens} tokens at {args.rate:g}/s, "
                f"{args.ttft * 1000:.0f} ms to first token; Slack allows {appends} appends/min",
                figures,
            )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak RSS of the process (bot + both fakes): {peak:.0f} MiB")


if __name__ == "__main__":
    asyncio.run(main())
