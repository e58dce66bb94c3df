"""Slack events -> turns. Listeners parse the payload and hand it on; Bolt has already
acknowledged the event, and the turn runs as a tracked background task."""

from __future__ import annotations

import logging
import re
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_bolt.context.async_context import AsyncBoltContext

from bot.conversation.incoming import parse_event
from bot.conversation.turn import Conversations
from bot.tasks import TaskGroup

log = logging.getLogger(__name__)


def register(app: AsyncApp, conversations: Conversations, tasks: TaskGroup) -> None:
    async def on_message_event(body: dict[str, Any], context: AsyncBoltContext) -> None:
        bot_user_id = context.bot_user_id
        incoming = parse_event(body, bot_user_id)
        if incoming is None or (not incoming.text and not incoming.mentions_bot):
            return
        if not incoming.is_dm and not incoming.mentions_bot and not incoming.thread_ts:
            return  # top-level channel chatter that does not address the bot
        tasks.spawn(
            conversations.handle(incoming, bot_user_id, context.bot_id),
            name=f"turn-{incoming.channel_id}-{incoming.ts}",
        )

    app.event("app_mention")(on_message_event)
    app.event("message")(on_message_event)


def acknowledge_the_rest(app: AsyncApp) -> None:
    """Registered last: any other event is acknowledged and ignored, so Slack does not deliver
    it again and again (Bolt would answer 404, and in Socket Mode not acknowledge at all)."""

    async def ignore(body: dict[str, Any]) -> None:
        log.debug("ignored event %s", (body.get("event") or {}).get("type"))

    app.event(re.compile(".*"))(ignore)
