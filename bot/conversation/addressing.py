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
from dataclasses import dataclass
from typing import Literal

from bot.conversation.incoming import Incoming
from bot.db import repositories as repo
from bot.db.claims import DeliveryClaims
from bot.db.models import Conversation
from bot.db.session import Database
from bot.db.turn_writes import CLAIM_AND_OPEN, ClaimedStart, ThreadStart

log = logging.getLogger(__name__)

ThreadFollowups = Literal["on", "mention"]


def continues_unmentioned(incoming: Incoming, followups: str) -> bool:
    """Whether an unmentioned message in a thread the bot is in is a follow-up for it."""
    return followups == "on" and not incoming.addresses_others


@dataclass(frozen=True)
class Opened:
    """A message addressed to the bot, claimed, and its thread's conversation (`created`: by
    this turn)."""

    conversation: Conversation
    created: bool


def thread_start(incoming: Incoming) -> ThreadStart:
    """The conversation `incoming` belongs to, to find or open."""
    return ThreadStart(
        incoming.team_id, incoming.channel_id, incoming.conversation_key, incoming.user_id
    )


async def claim_turn(
    db: Database, claims: DeliveryClaims, incoming: Incoming, followups: str
) -> Opened | Conversation | bool:
    """A message addressed to the bot (a mention, a DM), not handled before: claimed with its
    conversation found or opened, in one write (`Opened`). A thread message without a
    mention: True if it is ours to answer and was not handled before (its conversation is
    opened next), the known conversation if it is to be recorded without answering. Else
    False.

    Kept to the writes that must precede the placeholder (so that a duplicate never posts
    one)."""
    if incoming.mentions_bot or incoming.is_dm:
        claim = ClaimedStart(tuple(incoming.delivery_keys()), thread_start(incoming))
        opened = await db.group.add(CLAIM_AND_OPEN, claim)
        if opened is None:
            log.info("duplicate delivery of %s ignored", incoming.delivery_keys())
            return False
        return Opened(*opened)
    async with db.transaction() as session:
        known = await repo.find_conversation(
            session, incoming.team_id, incoming.channel_id, incoming.conversation_key
        )
    if known is None:
        return False  # a thread the bot is not part of
    if not await claims.claim(incoming.delivery_keys()):
        log.info("duplicate delivery of %s ignored", incoming.delivery_keys())
        return False
    if not continues_unmentioned(incoming, followups):
        return known
    return True
