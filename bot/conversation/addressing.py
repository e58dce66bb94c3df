"""Whether a message is the bot's to answer. In a DM, or when it mentions the bot: always. In a
channel thread the bot is already talking in (it has a conversation there, which only a
mention starts), with `THREAD_FOLLOWUPS=on` (the default) every later message continues the
conversation without a mention, unless it is addressed to someone else (it mentions a person,
a user group or the channel, and not the bot): that one, like every unmentioned message with
`THREAD_FOLLOWUPS=mention`, is kept as context and not answered. A thread the bot is not in
is left alone, nothing recorded. A delivery is handled once.

Who may talk to the bot this way is whoever may mention it: a person's own message (not a
bot's, not the bot's own, not an edit or a deletion: `incoming.parse_event`), and what their
prompt may hold is decided by the same reach rules as for a mention."""

from __future__ import annotations

import logging
from typing import Literal

from bot.conversation.incoming import Incoming
from bot.db import repositories as repo
from bot.db.claims import DeliveryClaims
from bot.db.models import Conversation
from bot.db.session import Database

log = logging.getLogger(__name__)

ThreadFollowups = Literal["on", "mention"]


def continues_unmentioned(incoming: Incoming, followups: str) -> bool:
    """Whether an unmentioned message in a thread the bot is in is a follow-up for it."""
    return followups == "on" and not incoming.addresses_others


async def claim_turn(
    db: Database, claims: DeliveryClaims, incoming: Incoming, followups: str
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
    if known is not None and not continues_unmentioned(incoming, followups):
        return known
    return True
