"""Cut rendered text into Slack-sized messages.

`chat.update` refuses text well below the documented 40,000 characters (`msg_too_long` near
4,000), so a long reply continues in further messages. Cuts fall on a paragraph, line or word
boundary when one is near, never inside an `&amp;`-style entity, and a code block cut in two is
closed and reopened so both halves render as code.
"""

from __future__ import annotations

FENCE = "```"
_CLOSE = "\n" + FENCE
_REOPEN = FENCE + "\n"


def _fence_open(text: str) -> bool:
    return text.count(FENCE) % 2 == 1


def _cut_point(text: str, budget: int) -> int:
    window = text[:budget]
    floor = budget // 2
    for separator in ("\n\n", "\n", " "):
        at = window.rfind(separator)
        if at > floor:
            return at
    cut = budget
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
