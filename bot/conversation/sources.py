"""Where each stored message of a prompt came from, seen from one turn's requester
(`bot.provenance`, design promise 9).

A person's message is stored with its author's kind (`bot.conversation.authors`); whether it is
the requester's own words is decided here, when a prompt is made: Alice's message is trusted in
Alice's turn, and untrusted (a member's, a guest's, another organisation's) in Bob's. A file is
untrusted whoever shared it. A read's result is a tool's. The assistant's own messages and what
the bot itself says in a tool message (a write's outcome, an error, "pending") have no source:
they are not input from anyone.

A summary of untrusted messages is itself untrusted: it carries the sources of what it
summarises, kept in its text after a marker (`with_sources`, `split_summary`; no column).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from bot.provenance import DATA_CLOSE, OUTSIDE, Source, delimit, source_of, sources_of

PERSON_KINDS = frozenset({"requester", "member", "guest", "external"})
# Between a summary's text and the JSON of its sources: an invisible separator and a word the
# summariser's text is not expected to hold; the last one counts (`rpartition`).
SUMMARY_MARK = "\u2063\u2063sources:"
SUMMARY_SOURCES_KEPT = 24
PROPOSAL_SOURCES_KEPT = 8  # sources a proposal keeps (its card and the policy's facts)
SUMMARY = "summary of the earlier conversation"


def shown_source(message: Any, requester: str | None) -> Source | None:
    """The source `message` is shown with in `requester`'s prompt; None: the bot's own words
    (or no requester is known: shown as stored, as before sources)."""
    role = str(getattr(message, "role", ""))
    stored = source_of(getattr(message, "source", None))
    if role == "tool":
        return stored  # a read's result; a write's outcome or an error is the bot's own
    if role == "assistant":
        return None
    if role != "user":  # a file or a tool's words stored in another shape stay untrusted
        return stored if stored is not None and stored.kind not in PERSON_KINDS else None
    author = getattr(message, "slack_user", None)
    if stored is not None and stored.kind not in PERSON_KINDS:
        return stored  # a file, or a tool's words stored as a message: never trusted
    author = (stored.author if stored else None) or author
    if author and author == requester:
        return Source("requester", "message", author, stored.link if stored else None)
    if stored is not None:
        if stored.kind == "requester":  # someone else's turn's requester: a member here
            return Source("member", stored.name, stored.author, stored.link)
        return stored
    if author:
        return Source("member", "message", author)  # stored before sources: a teammate
    return Source("external", "message from an app")  # an app's, imported before sources


def as_data(content: str, message: Any, requester: str | None) -> str:
    """`content` as the prompt shows it: delimited as data unless it is the requester's own
    words or the bot's (`bot.provenance.delimit`)."""
    if requester is None:
        return content
    source = shown_source(message, requester)
    return content if source is None else delimit(content, source)


def reclosed(kept: str, original: str, note: str) -> str:
    """A cut `original` that was a data block stays one: the cut part is closed again, and
    the bot's note about the cut follows it (outside the data)."""
    if original.endswith(DATA_CLOSE) and not kept.endswith(DATA_CLOSE):
        return f"{kept}\n{DATA_CLOSE}{note}"
    return kept + note


def newest_last(sources: Iterable[Source]) -> list[Source]:
    """Each source once (by kind, name and author: one person's many messages are one
    source), where it was last seen, newest last; the link of its newest sighting."""
    found: dict[tuple[str, str, str], Source] = {}
    for source in sources:
        key = (source.kind, source.name, source.author or "")
        found.pop(key, None)
        found[key] = source
    return list(found.values())


def kept(sources: Sequence[Source], limit: int) -> list[Source]:
    """At most `limit` of `sources`, in their order: the newest, except that outside input
    (a guest, another organisation, a file, a tool result) is never cut for a member's
    message. Cutting it would change the facts `outside` and `untrusted`, so an allow or a
    grant would cover a call proposed after it once a few teammates had spoken since."""
    if len(sources) <= limit:
        return list(sources)
    outside = [i for i, s in enumerate(sources) if s.outside]
    others = [i for i, s in enumerate(sources) if not s.outside]
    chosen = set(outside[-limit:])
    room = limit - len(chosen)
    if room > 0:
        chosen |= set(others[-room:])
    return [s for i, s in enumerate(sources) if i in chosen]


def proposal_sources(seen: Sequence[Any]) -> tuple[Source, ...]:
    """What a call proposed after `seen` (a prompt's untrusted sources, newest last) keeps,
    for its card, the one door and every later step (`kept`)."""
    return tuple(kept(sources_of(seen), PROPOSAL_SOURCES_KEPT))


def untrusted_in(messages: Sequence[Any], requester: str | None) -> list[Source]:
    """The untrusted sources of `messages` in `requester`'s prompt, oldest first."""
    shown = (shown_source(m, requester) for m in messages)
    return [s for s in shown if s is not None and s.untrusted]


def summarised(previous: Sequence[Source], older: Sequence[Any]) -> list[Source]:
    """What a new summary carries: the earlier summary's sources and every source of the
    messages it folds in, as stored (whose words they are depends on the turn)."""
    stored = [source_of(getattr(m, "source", None)) for m in older]
    people = [
        Source("member", "message", str(m.slack_user))
        for m, s in zip(older, stored, strict=True)
        if s is None and str(getattr(m, "role", "")) == "user" and getattr(m, "slack_user", None)
    ]
    found = [*previous, *(s for s in stored if s is not None), *people]
    return kept(newest_last(found), SUMMARY_SOURCES_KEPT)


def with_sources(summary: str, sources: Sequence[Source]) -> str:
    return f"{summary}\n\n{SUMMARY_MARK}{json.dumps([s.as_json() for s in sources])}"


def split_summary(stored: str) -> tuple[str, tuple[Source, ...]]:
    """A stored summary's text and the sources it carries (none: stored before sources)."""
    text, mark, tail = stored.rpartition(SUMMARY_MARK)
    if not mark:
        return stored, ()
    try:
        found = json.loads(tail)
    except ValueError:
        return text.rstrip(), ()
    return text.rstrip(), sources_of(found if isinstance(found, list) else [])


def summary_source(sources: Sequence[Source], requester: str | None) -> Source | None:
    """How a summary is shown in `requester`'s prompt: as data, of the most outside kind it
    summarised, when anything in it is not the requester's own words; None: trusted."""
    seen = [shown_source(_Stored(s), requester) for s in sources]
    untrusted = [s for s in seen if s is not None and s.untrusted]
    if not untrusted or requester is None:
        return None
    outside = [s.kind for s in untrusted if s.kind in OUTSIDE]
    return Source(outside[0] if outside else "member", SUMMARY)


def summary_untrusted(sources: Sequence[Source], requester: str | None) -> list[Source]:
    """The untrusted sources a summary holds, in `requester`'s prompt."""
    return untrusted_in([_Stored(s) for s in sources], requester)


class _Stored:
    """A summarised source in the shape `shown_source` reads (a user or a tool message)."""

    def __init__(self, source: Source) -> None:
        self.role = "user" if source.kind in PERSON_KINDS or source.kind == "file" else "tool"
        self.source = source
        self.slack_user = source.author
