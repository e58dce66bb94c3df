"""Where a reply in parts (`bot/slack/parts_reply.py`) may be cut: never mid-word, never
inside a code block, an inline span or a link, and always leaving a word for what follows."""

from __future__ import annotations

from bot.slack.split import _markers, _splits_a_span

FIRST_PART_CHARS = 60  # a sentence or line ending after this many characters is posted
PART_MIN_CHARS = 600  # an intermediate part holds at least this much
CANDIDATES = 40  # boundaries tried per look (it runs on every token while a part waits)
_SENTENCE_ENDS = (". ", "! ", "? ", ".\n", "!\n", "?\n", ":\n", "\n")


def _clean(text: str, at: int) -> bool:
    """Whether cutting `text` (the model's Markdown) at `at` leaves both halves whole: not in
    a code block, an inline span or a link."""
    before = text[:at]
    if before.count("```") % 2 == 1:
        return False
    line = before[before.rfind("\n") + 1 :].lstrip()
    if line.count("[") > line.count("]") or line.count("](") > line.count(")"):
        return False
    if line.startswith(("* ", "- ", "+ ")):
        line = line[2:]  # a bullet, not emphasis
    # A span still open may close in words not written yet: cutting there shows its syntax.
    if any(_markers(line.replace("```", ""), m) % 2 for m in ("*", "_", "~", "`")):
        return False
    return not _splits_a_span(text, at)


def _has_word_after(text: str, at: int) -> bool:
    return bool(text[at:].strip())


def part_cut(text: str, *, first: bool, ripe: bool, limit: int) -> int | None:
    """Where a part of the unposted `text` may end now (None: nowhere yet). `first`: the
    reply's first part (a sentence or line end after `FIRST_PART_CHARS`, or any word boundary
    once `ripe`); otherwise an intermediate part (a paragraph break after `PART_MIN_CHARS`
    once `ripe`, or any clean boundary once a message's worth waits)."""
    if first:
        ends: tuple[str, ...] = _SENTENCE_ENDS
        floor = FIRST_PART_CHARS
    else:
        ends, floor = ("\n\n",), PART_MIN_CHARS
    upto = min(len(text), limit)
    if first or ripe or len(text) > limit:
        candidates = sorted(
            {at + len(end.rstrip()) for end in ends for at in _ends(text, end, floor, upto)},
            reverse=True,
        )
        for cut in candidates[:CANDIDATES]:
            if _clean(text, cut) and _has_word_after(text, cut):
                return cut
    if (first and ripe) or len(text) > limit:
        at, tried = upto, 0
        while at > 0 and tried < CANDIDATES:  # bounded: this runs as the tokens come
            at = max(text.rfind(" ", 0, at), text.rfind("\n", 0, at))
            if text[:at].count("```") % 2 == 1:
                at = text.rfind("```", 0, at)  # nothing inside the code block will do
                continue
            tried += 1
            if at > 0 and text[:at].strip() and _clean(text, at) and _has_word_after(text, at):
                return at
    return None


def _ends(text: str, end: str, floor: int, upto: int) -> list[int]:
    """Where `end` occurs in `text[floor:upto]`, the last `CANDIDATES` of them."""
    found: list[int] = []
    at = text.rfind(end, 0, upto)
    while at >= floor and len(found) < CANDIDATES:
        found.append(at)
        at = text.rfind(end, 0, at)
    return found
