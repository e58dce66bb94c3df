"""What Slack's clients would show as a link in a message: its auto-linking, modelled so a test
can assert that nothing from the model or from outside on a card is one click away.

Slack makes a link of (docs.slack.dev, "Formatting text for app surfaces"; the text object's
`verbatim`; slackapi/java-slack-sdk#1069, where Slack's engineer says plain text in a message
is linked by the clients and "there is no way to disable it"):
- an explicit `<url>` or `<url|label>` in mrkdwn (the label itself is not linked again);
- a URL with a scheme, `scheme://…`, running to the next space or `<`/`>`;
- an e-mail address (a `mailto:` link) and a bare domain (`evil.example`, `README.md`): the
  fake takes any label run ending in a dot and two or more letters as a domain, more than
  Slack's list of top-level domains (the careful side), with the dots of other scripts
  (`。`, `．`, `｡`) as dots, and any dotted IPv4 address;
in `mrkdwn` and `plain_text` alike (the fake ignores `verbatim`: clients link plain text).

As in the JavaScript regexes a client runs, `\\s` does not match a zero-width space (U+200B):
it does not end a link that has begun, but it is no character of a scheme's `://`, of a
domain label or of an address either.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tests.fakes.slack import StoredMessage

_DOT = "[.\u3002\uff0e\uff61]"
EXPLICIT = re.compile(r"<([^<>|]*)(?:\|[^<>]*)?>")
SCHEME = re.compile(r"(?i)(?<![a-z0-9+.-])[a-z][a-z0-9+.-]*://[^\s<>]+")
EMAIL = re.compile(rf"[\w.+-]+@(?:[\w-]+{_DOT})+[^\W\d_]{{2,}}")
DOMAIN = re.compile(rf"(?<![\w-])(?:[\w-]+{_DOT})+[^\W\d_]{{2,}}(?![\w-])")
IPV4 = re.compile(r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?![\w.])")
_ENTITIES = (("&lt;", "<"), ("&gt;", ">"), ("&amp;", "&"))


@dataclass(frozen=True)
class Link:
    target: str
    explicit: bool  # written as `<url|label>` by the poster (the bot's own link)


def _unescaped(text: str) -> str:
    for entity, char in _ENTITIES:
        text = text.replace(entity, char)
    return text


def links_in(text: str, mrkdwn: bool = True) -> list[Link]:
    """Every link Slack would draw in `text` (a text object's `text`)."""
    found: list[Link] = []
    if mrkdwn:
        for token in EXPLICIT.finditer(text):
            target = token.group(1)
            if target and target[0] not in "@#!":  # a mention, a channel, a date: no URL
                found.append(Link(_unescaped(target), True))
        text = EXPLICIT.sub(" ", text)  # the labels are shown, not linked again
    text = _unescaped(text)
    for pattern in (SCHEME, EMAIL, DOMAIN, IPV4):
        for match in pattern.finditer(text):
            found.append(Link(match.group(0), False))
        text = pattern.sub(" ", text)
    return found


def links_in_blocks(node: Any) -> list[Link]:
    """The links of every text object in Block Kit blocks (or a view)."""
    found: list[Link] = []
    if isinstance(node, dict):
        kind, text = node.get("type"), node.get("text")
        if kind in ("mrkdwn", "plain_text") and isinstance(text, str):
            found += links_in(text, mrkdwn=kind == "mrkdwn")
        for value in node.values():
            if isinstance(value, dict | list):
                found += links_in_blocks(value)
    elif isinstance(node, list):
        for item in node:
            found += links_in_blocks(item)
    return found


def message_links(message: StoredMessage) -> list[Link]:
    """The links of a posted message: its text (mrkdwn) and its blocks."""
    return links_in(message.text) + links_in_blocks(message.blocks or [])
