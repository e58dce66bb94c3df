"""Whether a message is the bot's to answer: in a DM or when mentioned, always; in a channel
thread the bot is part of, when mentioned (or every message with `REPLY_IN_THREADS=always`),
while the thread's other messages are kept as context. A delivery is handled once."""

from __future__ import annotations

import logging

from bot.conversation.incoming import Incoming
from bot.db import repositories as repo
from bot.db.claims import DeliveryClaims
from bot.db.models import Conversation
from bot.db.session import Database

log = logging.getLogger(__name__)


async def claim_turn(
    db: Database, claims: DeliveryClaims, incoming: Incoming, reply_in_threads: str
) -> Conversation | bool:
    """True if this message is ours to answer and was not handled before; the known
    conversation if it is a thread message to record without answering; else False.

    Kept to the one write that must precede the placeholder (so that a duplicate never posts
    one)."""
    known: Conversation | None = None
    if not (incoming.mentions_bot or incoming.is_dm):
        async with db.transaction() as session:
            known = await repo.find_conversation(
                session, incoming.team_id, incoming.channel_id, incoming.conversation_key
            )
        if known is None:
            return False  # a thread the bot is not part of
    if not await claims.claim(incoming.delivery_keys()):
        log.info("duplicate delivery of %s ignored", incoming.delivery_keys())
        return False
    if known is not None and reply_in_threads != "always":
        return known
    return True
