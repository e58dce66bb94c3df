"""The card's "Proposed after reading:" line: every untrusted source the model had read in its
turn before proposing the write (`bot.provenance`), so an approver sees when someone other
than the requester could have steered it ("Proposed after reading: @bob's message ·
report.pdf · GitHub issue acme/api#12 · the wiki server").

People are shown as `@name` (looked up by the card's publisher, `card_people`), never as a
pinging `<@U…>`; a guest and another organisation's person say so. Each source links where it
can: a message or a file to its Slack permalink, a GitHub or Linear object to its page. Those
links are the bot's own (built from what Slack and the tool's API said, `https://` only); the
words are escaped and never become a link themselves (`card_text.safe`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from bot.provenance import Source
from bot.slack.card_fields import USER_ID
from bot.slack.card_text import safe
from bot.text import escape
from bot.tools.field_kinds import label_of

READ_BEFORE = "Proposed after reading:"  # a contract: the words before the sources
LINE_MAX = 1900  # characters of the line (a context element holds 2,000)
_LINK_UNSAFE = re.compile(r"[\s<>|]")
_UNDECLARED = re.compile(r"^([\w-]+) \{")  # a read that said nothing: "tool {arguments}"
PEOPLE = {"member", "guest", "external", "requester"}
WHO = {"guest": " (a guest)", "external": " (another organisation)"}
NOBODY = {
    "member": "a teammate's message",
    "guest": "a guest's message",
    "external": "a message from another organisation",
    "requester": "a message",
}


def _person(source: Source, people: dict[str, str]) -> str:
    author = source.author or ""
    name = people.get(author) if USER_ID.match(author) else None
    if name:
        return f"{safe(name, 120)}'s message{WHO.get(source.kind, '')}"
    if not author and source.name != "message":  # another app's message
        return safe(source.name, 120)
    return NOBODY.get(source.kind, "a message")


def _words(source: Source, people: dict[str, str]) -> str:
    if source.kind in PEOPLE:
        return _person(source, people)
    if source.kind == "tool" and (undeclared := _UNDECLARED.match(source.name)):
        return f"a result of {safe(label_of(undeclared.group(1)), 80)}"
    return safe(source.name, 200)


def _linked(words: str, link: str | None) -> str:
    if not link or not link.startswith("https://") or _LINK_UNSAFE.search(link):
        return words
    return f"<{escape(link)}|{words}>"


def reading_line(sources: Sequence[Source], people: dict[str, str]) -> str | None:
    """The line, or None when the turn had read nothing untrusted. One entry per thing a
    person reads the same (Bob's three messages: "@bob's message", linked to the newest), in
    the order they were read; past the line's room, how many more."""
    shown: dict[str, str | None] = {}
    for source in sources:
        if not source.untrusted:
            continue
        words = _words(source, people)
        shown.pop(words, None)
        shown[words] = source.link
    if not shown:
        return None
    parts = [_linked(words, link) for words, link in shown.items()]
    line, used = f":mag: {READ_BEFORE} ", 0
    kept: list[str] = []
    for part in parts:
        if len(line) + used + len(part) + 40 > LINE_MAX:
            break
        kept.append(part)
        used += len(part) + 3
    more = len(parts) - len(kept)
    return line + " · ".join(kept) + (f" · and {more} more" if more else "")
