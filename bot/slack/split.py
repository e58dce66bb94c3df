"""Cut rendered text into Slack-sized messages.

`chat.update` refuses text well below the documented 40,000 characters (`msg_too_long` near
4,000), so a long reply continues in further messages. Cuts fall on a paragraph, line or word
boundary when one is near, never inside an `&amp;`-style entity, a `<url|label>` link or a
`*bold*`, `_italic_`, `~strike~` or `` `code` `` span (either half would show the raw syntax,
and a link cut in two points nowhere), and a code block cut in two is closed and reopened so
both halves render as code.
"""

from __future__ import annotations

FENCE = "```"
_CLOSE = "\n" + FENCE
_REOPEN = FENCE + "\n"


def _fence_open(text: str) -> bool:
    return text.count(FENCE) % 2 == 1


def _markers(text: str, marker: str) -> int:
    """How many of `marker` in `text` can open or close a span: at a word's edge, not inside
    a word (`snake_case` is no italics)."""
    count = 0
    for at, char in enumerate(text):
        if char != marker:
            continue
        before = text[at - 1] if at else " "
        after = text[at + 1] if at + 1 < len(text) else " "
        if not (before.isalnum() and after.isalnum()):
            count += 1
    return count


def _splits_a_span(text: str, at: int) -> bool:
    """Whether cutting `text` at `at` falls inside a link or an inline span of its line."""
    if _fence_open(text[:at]):
        return False  # inside a code block: the fence is closed and reopened around the cut
    start = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at)
    before, after = text[start:at], text[at : len(text) if end == -1 else end]
    opened = before.rfind("<")
    if opened != -1 and ">" not in before[opened:] and ">" in after:
        return True
    before, after = before.replace(FENCE, ""), after.replace(FENCE, "")
    return any(
        _markers(before, m) % 2 == 1 and _markers(after, m) > 0 for m in ("*", "_", "~", "`")
    )


def _safe_cut(text: str, budget: int, floor: int) -> int | None:
    """The last paragraph, line or word boundary in `text[:budget]` above `floor` that splits
    no span, preferring paragraphs, then lines, then words."""
    for separator in ("\n\n", "\n", " "):
        end = budget
        while (at := text.rfind(separator, 0, end)) > floor:
            if not _splits_a_span(text, at):
                return at
            end = at
    return None


def _cut_point(text: str, budget: int) -> int:
    cut = _safe_cut(text, budget, budget // 2)
    if cut is None:
        cut = _safe_cut(text, budget, 0)
    if cut is None:
        opened = text.rfind("<", 0, budget)
        if opened > 0 and ">" not in text[opened:budget]:
            return opened  # a link that does not fit whole starts the next message
        cut = budget
        window = text[:budget]
        amp = window.rfind("&", max(0, budget - 8))
        if amp != -1 and ";" not in window[amp:]:
            cut = amp  # do not split an entity such as &amp;
    return max(cut, 1)


def split_message(text: str, limit: int) -> list[str]:
    """Chunks of at most `limit` characters that together show all of `text`."""
    if limit <= len(_CLOSE) + len(_REOPEN) + 1:
        raise ValueError("limit too small")
    chunks: list[str] = []
    rest = text
    while len(rest) > limit:
        cut = _cut_point(rest, limit - len(_CLOSE))
        head, rest = rest[:cut], rest[cut:]
        if rest[:1] in ("\n", " "):
            rest = rest[1:]
        if _fence_open(head):
            head += _CLOSE
            rest = _REOPEN + rest.lstrip("\n")
        chunks.append(head)
    chunks.append(rest)
    return chunks
