"""How the replies of a load benchmark went, read from the fake Slack's records: natively, by
edits or in parts, how many posts and edits each made, how late each way was, and how full
Slack's `chat.postMessage` minute was (`bench/sustained.py` compares one process with three
replicas by these counts: on a shared machine, the seconds move with the other work)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from bench.processes import pct
from tests.fakes.slack import Call

POSTS_FLOOR = 300  # chat.postMessage a minute per workspace (`documented_floors`)


@dataclass
class Transport:
    """The replies that went one way: how many calls each made, how late they were."""

    replies: int = 0
    posts: int = 0  # chat.postMessage calls answered ok
    updates: int = 0  # chat.update calls answered ok
    final: list[float] = field(default_factory=list)
    first_words: list[float] = field(default_factory=list)
    # Replies of this way by their count of posts, and of edits: {2: 140, 1: 11} (a reply in
    # parts with one post showed its first words only with its final)
    by_posts: Counter[int] = field(default_factory=Counter)
    by_edits: Counter[int] = field(default_factory=Counter)


@dataclass
class Ways:
    transports: dict[str, Transport] = field(default_factory=dict)  # "native", "edits", "parts"
    densest_posts: int = 0  # chat.postMessage calls answered ok in the busiest 60 s
    # For each final later than the target: the posts Slack had answered in the minute before
    # its last token (about the floor: the floor held it back; far fewer: the bot did)
    posts_before_late: list[int] = field(default_factory=list)
    # chat.postMessage and chat.update calls answered ok in each 10 s from the first call
    posts_by_10s: list[int] = field(default_factory=list)
    updates_by_10s: list[int] = field(default_factory=list)

    def lines(self, final_target: float) -> list[str]:
        out = [f"chat.postMessage in the busiest 60 s {self.densest_posts}   (floor {POSTS_FLOOR})"]
        late = sorted(self.posts_before_late)
        if late:
            out.append(
                f"finals later than {final_target:g} s: {len(late)}; posts in the minute before "
                f"their last token: min {late[0]}, p50 {pct([float(n) for n in late], 0.5):.0f}"
            )
        out.append(
            f"{'replies by transport':<22} {'count':>5} {'posts':>6} {'edits':>6} "
            f"{'final p95':>10} {'first words p95':>16}"
        )
        for name, way in sorted(self.transports.items()):
            out.append(
                f"{name:<22} {way.replies:>5} {way.posts / way.replies:>6.2f}"
                f" {way.updates / way.replies:>6.2f} {pct(way.final, 0.95):>8.2f} s"
                f" {pct(way.first_words, 0.95):>14.2f} s"
            )
        for name, way in sorted(self.transports.items()):
            if name == "native":
                continue
            posts = ", ".join(f"{k}: {v}" for k, v in sorted(way.by_posts.items()))
            edits = ", ".join(f"{k}: {v}" for k, v in sorted(way.by_edits.items()))
            out.append(f"{name} replies by posts {{{posts}}}, by edits {{{edits}}}")
            slow = sorted(w for w in way.first_words if w > 3.0)
            out.append(
                f"{name} replies' first words later than 3 s: {len(slow)}"
                + (f" ({', '.join(f'{w:.1f}' for w in slow[:12])} s)" if slow else "")
            )
        out.append(f"posts in each 10 s   {' '.join(map(str, self.posts_by_10s))}")
        out.append(f"edits in each 10 s   {' '.join(map(str, self.updates_by_10s))}")
        return out


def per_10s(times: list[float], start: float) -> list[int]:
    """How many of `times` fall in each 10 s from `start`."""
    counts: Counter[int] = Counter(int((t - start) // 10) for t in times)
    return [counts[k] for k in range(max(counts, default=-1) + 1)]


def transport_of(calls: list[Call]) -> str:
    """How a reply went, from its channel's calls answered ok: a stream started ("native"),
    edited ("edits", the first post then `chat.update`), or only posted ("parts")."""
    methods = {c.method for c in calls}
    if "chat.startStream" in methods:
        return "native"
    return "edits" if "chat.update" in methods else "parts"


def densest_minute(times: list[float], seconds: float = 60.0) -> int:
    """The most of `times` (sorted) inside any `seconds`."""
    best, start = 0, 0
    for end, at in enumerate(times):
        while times[start] <= at - seconds:
            start += 1
        best = max(best, end - start + 1)
    return best


def read_ways(
    measured: list[Call],
    channels: list[str],
    final: list[float],
    first_words: list[float],
    last_tokens: list[float | None],
    final_target: float = 2.0,
) -> Ways:
    """Reply i was in `channels[i]`, its figures `final[i]` and `first_words[i]`, its model
    stream's last token at `last_tokens[i]` (None: never played)."""
    ways = Ways()
    by_channel: dict[str, list[Call]] = {}
    for call in measured:
        if call.ok:
            by_channel.setdefault(str(call.args.get("channel", "")), []).append(call)
    for i, channel in enumerate(channels):
        calls = by_channel.get(channel, [])
        way = ways.transports.setdefault(transport_of(calls), Transport())
        way.replies += 1
        posted = sum(c.method == "chat.postMessage" for c in calls)
        edited = sum(c.method == "chat.update" for c in calls)
        way.posts += posted
        way.updates += edited
        way.by_posts[posted] += 1
        way.by_edits[edited] += 1
        way.final.append(final[i])
        way.first_words.append(first_words[i])
    posts = [c.at for c in measured if c.ok and c.method == "chat.postMessage"]
    ways.densest_posts = densest_minute(posts)
    start = min((c.at for c in measured), default=0.0)
    ways.posts_by_10s = per_10s(posts, start)
    updates = [c.at for c in measured if c.ok and c.method == "chat.update"]
    ways.updates_by_10s = per_10s(updates, start)
    for i, at in enumerate(last_tokens):
        if at is not None and final[i] > final_target:
            ways.posts_before_late.append(sum(at - 60.0 < t <= at for t in posts))
    return ways
