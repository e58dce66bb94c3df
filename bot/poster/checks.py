"""What a post carries and what may let it through: the refusal, and a person's approval of
exactly this text for exactly this destination (`bot.poster`)."""

from __future__ import annotations

from dataclasses import dataclass

from bot import audience

# What a message made only of the bot's own words (and ids, names, links) carries.
NOTHING_PRIVATE = audience.WORKSPACE


class PostRefused(Exception):
    """What a message carries may not be read by everyone where it would go."""

    def __init__(self, channel: str, carries: str) -> None:
        super().__init__(f"not posted to {channel}: it carries what not all its readers may read")
        self.channel = channel
        self.carries = carries


@dataclass(frozen=True)
class ApprovedWrite:
    """A person approved exactly this text for exactly this destination: the card of the
    proposal whose idempotency key this is. Only an approved write's tool passes one."""

    proposal_key: str
