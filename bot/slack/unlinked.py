"""Text that Slack shows in full but never turns into a link (issue 27; design promises 1, 5).

Slack's clients make links of what looks like one in a message's text, whatever the text
object: a URL with a scheme (`https://…`, `ftp://…`), a bare domain (`evil.example`,
`README.md`: `.md` is a country's domain), and an e-mail address (a `mailto:` link). A
`mrkdwn` text object is auto-linked unless `verbatim` is set, and Slack's own engineers say of
text in a message that is plain, "there is no way to disable" the links its clients draw
(slackapi/java-slack-sdk#1069); `unfurl_links`/`unfurl_media` only stop the previews. So a URL
that came from the model or from outside (an argument, a description, a decline note) would be
one click away for everyone in the channel, a declined phishing link included.

`unlinked` keeps every character where it is and adds a zero-width space (U+200B) where a
link would form: after the `:` of `://`, after a `.` between a word character and a letter
(a domain's labels: its last one is letters), after each dot of an IPv4 address, and after an
`@` between two word characters. None of
these may stand inside a scheme, a domain label or an address's domain, so no part of the
text still reads as a link, and a person reads the same characters as before. A zero-width
space that was in the text itself is already shown as its code (`bot.tools.invisible`), so the
ones added here are never mistaken for the value's own.

Only text from the model or from outside goes through it: the bot's own link tokens
(`<https://…|Open>`, a permalink) are built after, never inside it.
"""

from __future__ import annotations

import re

BREAK = "\u200b"
# Dots that other scripts' linkifiers read as a domain's dot (ideographic and full-width ones).
# A dot before a letter (a domain's last label is letters: `4.2` or `v1.2` is no domain), and
# every dot of an IPv4 address.
_DOT = re.compile(r"(?<=\w)([.\u3002\uff0e\uff61])(?=[^\W\d_])")
_IPV4 = re.compile(r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?![\w.])")
_SCHEME = re.compile(r":(?=//)")
_AT = re.compile(r"(?<=\w)@(?=\w)")
SECTION_TEXT = 3000  # characters of a section's text object


def unlinked(text: str) -> str:
    """`text` with a zero-width space wherever Slack would start or continue a link."""
    if "." not in text and ":" not in text and "@" not in text and text.isascii():
        return text
    text = _SCHEME.sub(":" + BREAK, text)
    text = _IPV4.sub(lambda m: m.group(0).replace(".", "." + BREAK), text)
    text = _DOT.sub(lambda m: m.group(1) + BREAK, text)
    return _AT.sub("@" + BREAK, text)


def unlinked_pieces(text: str, limit: int = SECTION_TEXT) -> list[str]:
    """`unlinked(text)` in pieces of at most `limit` characters (the breaks it adds may take a
    piece that fit over a text object's limit), cut after a break where one is near."""
    shown = unlinked(text)
    pieces: list[str] = []
    while len(shown) > limit:
        cut = shown.rfind(BREAK, 0, limit) + 1 or limit
        pieces.append(shown[:cut])
        shown = shown[cut:]
    pieces.append(shown)
    return pieces
