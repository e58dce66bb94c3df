"""`slack`: read and act in the workspace through the Web API.

Text the model wants to post is escaped like every model text (`&`, `<`, `>`), so an approved
message can never ping `@channel` or a user by smuggling mention syntax.

Reach: the bot sees every channel it was invited to, but each tool acts for the person who asked.
Reading a private channel (or a DM) needs the requester to be a member of it; every write needs
the requester to be a member of the target channel, checked when the card is prepared and
again just before the write runs. A message post (or a scheduled one) carries the proposal's
idempotency key in its message metadata, so a retry finds the earlier post instead of posting
twice: in the channel's history since the approval, however busy it became, and for a message
still waiting to be posted, among the channel's scheduled messages (same time, same text).
"""

from __future__ import annotations

from bot.tools.packs.slack.reach import IDEMPOTENCY_EVENT
from bot.tools.packs.slack.reads import get_channel_info, get_recent_messages, lookup_user
from bot.tools.packs.slack.writes import post_message, schedule_message, set_channel_topic

PACK = "slack"

TOOLS = [
    get_channel_info,
    get_recent_messages,
    lookup_user,
    post_message,
    schedule_message,
    set_channel_topic,
]

__all__ = ["IDEMPOTENCY_EVENT", "PACK", "TOOLS"]
