"""Notes on what a value will do at its destination that its characters alone do not say: a
link's real target beside its text, a mention that will notify people (or will not, because
the tool escapes it), text that hides itself when rendered."""

from __future__ import annotations

import re
import unicodedata
from enum import StrEnum
from typing import Any, Protocol
from urllib.parse import urlsplit

from bot.tools.invisible import visible

MAX_NOTES = 12
NOTE_TEXT = 120  # characters of a link's text or target quoted in a note


class Mentions(StrEnum):
    """How a tool's destination treats mention syntax in what it is sent."""

    SLACK = "slack"  # Slack renders the text as sent: <!channel> notifies the channel
    SLACK_ESCAPED = "slack-escaped"  # the tool escapes &, <, >: mentions show as typed
    GITHUB = "github"  # @login and @org/team notify on GitHub
    MARKDOWN = "markdown"  # a Markdown destination with its own @mentions (Linear)
    PLAIN = "plain"  # stored and shown escaped (the task board): notifies nobody
    UNKNOWN = "unknown"  # a destination we do not know (MCP): say what could happen


# The built-in packs' destinations; a tool may declare its own (`Tool.mentions`).
PACK_MENTIONS = {
    "github": Mentions.GITHUB,
    "linear": Mentions.MARKDOWN,
    "tasks": Mentions.PLAIN,
    "slack": Mentions.SLACK,
}


class _Tool(Protocol):
    @property
    def mentions(self) -> str: ...
    @property
    def pack(self) -> str: ...
    @property
    def input_schema(self) -> dict[str, Any] | None: ...


def mentions_of(tool: _Tool | None) -> Mentions:
    """What the tool declares, else its built-in pack's default; a tool described by a schema
    (an MCP server's, whatever the server is named) goes somewhere we do not know."""
    if tool is None:
        return Mentions.UNKNOWN
    if tool.mentions:
        return Mentions(tool.mentions)
    if tool.input_schema is not None:
        return Mentions.UNKNOWN
    return PACK_MENTIONS.get(tool.pack, Mentions.UNKNOWN)


_MD_LINK = re.compile(r"!?\[([^\]\n]{0,500})\]\(\s*<?([^)\s>]{1,2000})>?(?:\s+\"[^\"]*\")?\s*\)")
_MD_REF = re.compile(r"^\s{0,3}\[([^\]\n]{1,500})\]:\s*<?(\S{1,2000}?)>?(?:\s|$)", re.M)
_MRKDWN_LINK = re.compile(r"<((?:https?|mailto|ftp|slack)[^|>\s]{1,2000})\|([^>]{0,500})>")
_HTML_LINK = re.compile(
    r"<a\s[^>]*?href\s*=\s*[\"']?([^\"'\s>]{1,2000})[^>]*>(.{0,500}?)</a>", re.I | re.S
)
_HTML_COMMENT = re.compile(r"<!--(.{0,2000}?)-->", re.S)
_SLACK_SPECIAL = re.compile(r"<!(channel|here|everyone)(?:\|[^>]{0,100})?>")
_SLACK_USER = re.compile(r"<@([UW][A-Z0-9]{1,30})(?:\|[^>]{0,100})?>")
_SLACK_GROUP = re.compile(r"<!subteam\^([A-Z0-9]{1,30})(?:\|[^>]{0,100})?>")
_AT_WORD = re.compile(
    r"(?<![\w@`/.])@([A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:/[A-Za-z0-9_.-]{1,100})?)"
)
_BROAD = {"channel", "here", "everyone"}

_SPECIAL_EFFECT = {
    "channel": "notifies everyone in the channel",
    "here": "notifies everyone active in the channel",
    "everyone": "notifies everyone in the workspace",
}


def _quote(text: str) -> str:
    text = visible(text)
    return text if len(text) <= NOTE_TEXT else text[: NOTE_TEXT - 1] + "…"


def _host(text: str) -> str | None:
    """The host a piece of link text names, if it looks like an address."""
    candidate = text.strip().strip("<>").lower()
    if " " in candidate or "." not in candidate:
        return None
    parts = urlsplit(candidate if "://" in candidate else f"//{candidate}")
    host = parts.hostname or ""
    return host.removeprefix("www.") if "." in host else None


def _link_note(text: str, target: str) -> str:
    shown = f'link "{_quote(text)}" goes to {_quote(target)}'
    named, real = _host(text), _host(target)
    if named and named != real:
        return f"WARNING: the text names {named} but the {shown}"
    return shown


def _links(raw: str) -> list[str]:
    found = [_link_note(m.group(1), m.group(2)) for m in _MD_LINK.finditer(raw)]
    found += [_link_note(m.group(1), m.group(2)) for m in _MD_REF.finditer(raw)]
    found += [_link_note(m.group(2), m.group(1)) for m in _MRKDWN_LINK.finditer(raw)]
    found += [_link_note(m.group(2), m.group(1)) for m in _HTML_LINK.finditer(raw)]
    return found


def _slack_syntax(raw: str) -> list[tuple[str, str]]:
    """(what is written, what Slack would do with it) for each Slack mention in `raw`."""
    found = [(m.group(0), _SPECIAL_EFFECT[m.group(1)]) for m in _SLACK_SPECIAL.finditer(raw)]
    found += [(m.group(0), f"notifies the person {m.group(1)}") for m in _SLACK_USER.finditer(raw)]
    found += [
        (m.group(0), f"notifies everyone in the user group {m.group(1)}")
        for m in _SLACK_GROUP.finditer(raw)
    ]
    return found


def _mentions(raw: str, mentions: Mentions) -> list[str]:
    slack = _slack_syntax(raw)
    words = [m.group(0) for m in _AT_WORD.finditer(raw)]
    notes: list[str] = []
    if mentions is Mentions.SLACK:
        notes += [f"{_quote(w)} {effect}" for w, effect in slack]
        notes += [
            f"{_quote(w)} is plain text here and notifies nobody"
            for w in words
            if w[1:].lower() in _BROAD
        ]
    elif mentions in (Mentions.SLACK_ESCAPED, Mentions.PLAIN):
        notes += [f"{_quote(w)} is shown as typed and notifies nobody" for w, _ in slack]
        notes += [
            f"{_quote(w)} is plain text and notifies nobody"
            for w in words
            if w[1:].lower() in _BROAD
        ]
    elif mentions is Mentions.GITHUB:
        notes += [f"{_quote(w)} does nothing on GitHub" for w, _ in slack]
        for word in words:
            team = "/" in word
            notes.append(
                f"{_quote(word)} notifies every member of the GitHub team {_quote(word)}"
                if team
                else f"{_quote(word)} notifies the GitHub user {_quote(word)} (if they exist)"
            )
    else:  # a Markdown destination or one we do not know
        where = "if this text reaches Slack" if mentions is Mentions.UNKNOWN else "in Slack only"
        notes += [f"{_quote(w)} {effect} {where}" for w, effect in slack]
        notes += [f"{_quote(w)} may notify {_quote(w)} where it is posted" for w in words]
    return notes


def _rendered_hidden(raw: str, mentions: Mentions) -> list[str]:
    if mentions in (Mentions.SLACK, Mentions.SLACK_ESCAPED, Mentions.PLAIN):
        return []
    return [
        f"an HTML comment, not displayed once rendered: {_quote(m.group(0))}"
        for m in _HTML_COMMENT.finditer(raw)
    ]


def _hidden_note(raw: str, count: int) -> list[str]:
    if not count:
        return []
    direction = any(unicodedata.bidirectional(c) in ("RLO", "LRO", "RLE", "LRE") for c in raw)
    note = f"{count} invisible or formatting character(s), shown as [U+…] codes"
    if direction:
        note += "; a direction override makes the text after it display reversed"
    return [note]


def notes_for(raw: str, mentions: Mentions, hidden: int) -> tuple[str, ...]:
    """What `raw` does at its destination beyond its characters, most important first, at
    most `MAX_NOTES` (the rest counted)."""
    if raw.isalnum():
        return ()
    notes: list[str] = []
    for note in [
        *_hidden_note(raw, hidden),
        *_mentions(raw, mentions),
        *_links(raw),
        *_rendered_hidden(raw, mentions),
    ]:
        if note not in notes:
            notes.append(note)
    if len(notes) > MAX_NOTES:
        more = len(notes) - (MAX_NOTES - 1)
        notes = [*notes[: MAX_NOTES - 1], f"and {more} more note(s) like these"]
    return tuple(notes)
