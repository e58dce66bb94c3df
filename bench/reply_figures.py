"""What a reply looked like to its reader, read from the fakes' records (bench/stream.py,
bench/sustained.py): when its first words and its exact final showed, and how far behind the
model the shown text was while it streamed."""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from tests.fakes.openai import Played
from tests.fakes.slack import FakeSlack

PLACEHOLDER = "_Thinking…_"
CURSOR = " ▍"


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


def finished(slack: FakeSlack, channel: str, final: str) -> bool:
    """The channel shows the exact final text and none of its streams is still open."""
    messages = slack.bot_messages(channel)
    streams = [slack.streams[m.ts] for m in messages if m.ts in slack.streams]
    shown = " ".join(m.text for m in messages).split()
    return shown == final.split() and not any(s.open for s in streams)
