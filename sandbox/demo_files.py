"""The demo model's answer to "what is in this file": from what the bot read and put in the
prompt, never from the sandbox's own store. A file reaches the model as a user message whose
text is `<data source="file: NAME (shared by USER)">\\nTEXT\\n</data>` (the bot's
`bot.provenance.delimit`), and an image as an `image_url` content part beside it.

What a file says is data: the demo quotes it, and never takes a request from it (only the
person's own words, outside any data block, are a request)."""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Any

# The bot's label for a file (`bot.provenance.label`) inside its data marker.
FILE_BLOCK = re.compile(
    r'<data source="file: (?P<name>.*?)(?: \(shared by (?P<by>[^)"]*)\))?">\n'
    r"(?P<text>.*?)\n</data>",
    re.S,
)
ANY_BLOCK = re.compile(r"<data source=\"[^\"]*\">\n.*?\n</data>", re.S)
# The bot's first line of a file message ("q3.csv (text, 34 bytes):"), inside the data block;
# a prompt renderer that does not delimit yet sends it bare, with the sharer as `name`.
# ("chart.png: an image (PNG, 1×1, 69 bytes).")
HEADER = re.compile(r"\A(?P<name>[^\n]+?)(?: \([^,()\n]+, [^()\n]+\):|: an image\b[^\n]*)(?:\n|\Z)")
ASKS = re.compile(
    r"\b(what'?s|what is|what does|describe|summari[sz]e|read|look at|tell me about|"
    r"what'?s in|open)\b[^.?!]*\b(files?|attachments?|images?|pictures?|screenshots?|photos?|"
    r"documents?|pdfs?|csvs?|logs?|this|it)\b",
    re.I,
)
NAMES_A_FILE = re.compile(r"\b(files?|attachments?|images?|screenshots?|pdf|csv)\b", re.I)
QUOTE_CHARS = 160


@dataclass(frozen=True)
class SeenFile:
    name: str
    shared_by: str
    text: str
    image_bytes: int | None = None  # an image part came with it: its size


def _parts(message: dict[str, Any]) -> tuple[str, list[int]]:
    """A message's text, and the byte sizes of its image parts."""
    content = message.get("content")
    if not isinstance(content, list):
        return str(content or ""), []
    texts, images = [], []
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text":
            texts.append(str(part.get("text", "")))
        elif part.get("type") == "image_url":
            url = str((part.get("image_url") or {}).get("url", ""))
            images.append(_data_url_size(url))
    return "\n".join(texts), images


def _data_url_size(url: str) -> int:
    _, sep, data = url.partition(";base64,")
    if not sep:
        return 0
    try:
        return len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return 0


def files_seen(messages: list[dict[str, Any]]) -> list[SeenFile]:
    """Every file the bot put in the prompt, in order; an image part goes with the file block
    of its own message."""
    seen: list[SeenFile] = []
    for message in messages:
        if message.get("role") != "user":
            continue
        text, images = _parts(message)
        blocks = [(b["name"], b["by"] or "", b["text"]) for b in FILE_BLOCK.finditer(text)]
        bare = HEADER.match(text)
        if not blocks and bare:
            blocks = [(bare["name"], str(message.get("name") or ""), text)]
        for n, (name, by, body) in enumerate(blocks):
            size = images[n] if n < len(images) else None
            header = HEADER.match(body)
            body = body[header.end() :] if header else body
            seen.append(SeenFile(name, by, body, size))
    return seen


def request_of(messages: list[dict[str, Any]]) -> tuple[dict[str, Any], str]:
    """The person's own words: the last user message with text outside any data block."""
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        own = ANY_BLOCK.sub(" ", _parts(message)[0]).strip()
        if own and not HEADER.match(own) and not _parts(message)[1]:  # a file's is no request
            return message, own
    return (messages[-1] if messages else {}), ""


def _person(user: str) -> str:
    """A sandbox person's name from their id (UALICE: Alice); never the id itself."""
    return user[1:].capitalize() if re.fullmatch(r"U[A-Z]+", user) else "someone"


def _one(found: SeenFile) -> str:
    who = f" (shared by {_person(found.shared_by)})" if found.shared_by else ""
    if found.image_bytes is not None:
        return f"*{found.name}*{who} is an image, {found.image_bytes} bytes."
    words = " ".join(found.text.split())
    quote = words[:QUOTE_CHARS].rstrip() + ("…" if len(words) > QUOTE_CHARS else "")
    quote = quote.replace("<", "‹").replace(">", "›")  # quoted, it can never ping or link
    lines = len([line for line in found.text.splitlines() if line.strip()])
    return f"*{found.name}*{who}, {lines} line(s) of text, begins: “{quote}”"


def answer(messages: list[dict[str, Any]], request: str) -> str | None:
    """The reply to a question about the shared files, or None when it is not one."""
    if not ASKS.search(request):
        return None
    found = files_seen(messages)
    if not found:
        if NAMES_A_FILE.search(request):
            return "I can't see a shared file in this conversation. Share one, then ask again."
        return None
    shown = found[-3:]  # the latest ones
    if len(shown) == 1:
        return "Here is what I read in the file: " + _one(shown[0])
    return "Here is what I read in the files:\n" + "\n".join(f"• {_one(f)}" for f in shown)
