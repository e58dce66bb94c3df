"""Characters that hide themselves: sent, but rendered as nothing (or as something else).

Unicode's format characters (zero-width spaces and joiners, direction overrides and isolates,
the byte-order mark, tag characters), controls, odd spaces and separators, plus the blank letters
and fillers a renderer shows as empty space. Shown to approvers as codes like `[U+202E]`.
"""

from __future__ import annotations

import unicodedata

# Characters that render as nothing (or as something else) although they are sent: Unicode's
# format characters (zero-width spaces and joiners, direction overrides and isolates, the BOM,
# tag characters) plus the blank letters and fillers a renderer shows as empty space.
_BLANK = {0x115F, 0x1160, 0x3164, 0xFFA0, 0x2800, 0x034F, 0x180E}
_HIDDEN_CATEGORIES = {"Cf", "Cc", "Co", "Cn", "Cs", "Zl", "Zp", "Zs"}


def hidden(char: str) -> bool:
    if char in "\n\t ":
        return False
    code = ord(char)
    if code in _BLANK or 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF:
        return True  # blank letters and variation selectors
    return unicodedata.category(char) in _HIDDEN_CATEGORIES


def code_of(char: str) -> str:
    return f"[U+{ord(char):04X}]"


def visible(text: str) -> str:
    """`text` with every character that hides itself replaced by its visible code."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(code_of(c) if hidden(c) else c for c in text)


def hidden_count(text: str) -> int:
    return sum(1 for c in text if hidden(c))


def utf16_len(text: str) -> int:
    """Length as Slack counts it (JavaScript string length)."""
    return len(text) + sum(1 for c in text if ord(c) > 0xFFFF)
