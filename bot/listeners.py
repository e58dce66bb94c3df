"""Slack events -> turns. Listeners parse the payload and hand it on; Bolt has already
acknowledged the event, and the turn runs as a tracked background task.

Wiring, not transport: it sits beside the composition root (`bot/app.py`) because it calls up
into the conversation, which renders through `bot/slack/`; inside `bot/slack/` it made the two
packages import each other."""

from __future__ import annotations

import logging
import re
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_bolt.context.async_context import AsyncBoltContext

from bot.conversation.incoming import SLACK_ID, SLACK_TS, parse_event
from bot.conversation.stopping import Stopper, StopRequest
from bot.conversation.turn import Conversations
from bot.slack.dm_welcome import DmWelcome
from bot.tasks import TaskGroup

log = logging.getLogger(__name__)


def parse_stop(body: dict[str, Any]) -> StopRequest | None:
    """The `agent_session_stopped` event as a StopRequest; None if it is not well formed."""
    event = body.get("event") or {}
    fields = (body.get("team_id"), event.get("channel"), event.get("thread_ts"), event.get("user"))
    streams = event.get("streaming_message_ts") or []
    if not all(isinstance(f, str) and f for f in fields) or not isinstance(streams, list):
        return None
    team, channel, thread_ts, user = (str(f) for f in fields)
    return StopRequest(team, channel, thread_ts, user, tuple(str(ts) for ts in streams))


def parse_thread_started(body: dict[str, Any]) -> tuple[str, str, str] | None:
    """The DM channel, thread and person of an `assistant_thread_started` event; None if it
    is not in the shape Slack sends (a DM's id, a ts, a user id)."""
    thread = (body.get("event") or {}).get("assistant_thread")
    if not isinstance(thread, dict):
        return None
    channel, ts, user = (thread.get(k) for k in ("channel_id", "thread_ts", "user_id"))
    if not (isinstance(channel, str) and SLACK_ID.fullmatch(channel) and channel[0] == "D"):
        return None
    if not (isinstance(ts, str) and SLACK_TS.fullmatch(ts)):
        return None
    if not (isinstance(user, str) and SLACK_ID.fullmatch(user)):
        return None
    return channel, ts, user


def register(
    app: AsyncApp,
    conversations: Conversations,
    tasks: TaskGroup,
    stopper: Stopper,
    welcome: DmWelcome | None = None,
) -> None:
    async def on_message_event(body: dict[str, Any], context: AsyncBoltContext) -> None:
        bot_user_id = context.bot_user_id
        incoming = parse_event(body, bot_user_id)
        if incoming is None or not (incoming.text or incoming.files or incoming.mentions_bot):
            return
        if not incoming.is_dm and not incoming.mentions_bot and not incoming.thread_ts:
            return  # top-level channel chatter that does not address the bot
        tasks.spawn(
            conversations.handle(incoming, bot_user_id, context.bot_id),
            name=f"turn-{incoming.channel_id}-{incoming.ts}",
        )

    async def on_stop(body: dict[str, Any]) -> None:
        request = parse_stop(body)
        if request is None:
            log.info("ignored a malformed agent_session_stopped event")
            return
        tasks.spawn(stopper.stop(request), name=f"stop-{request.channel}-{request.thread_ts}")

    async def on_thread_started(body: dict[str, Any]) -> None:
        started = parse_thread_started(body)
        if started is None:
            log.info("ignored a malformed assistant_thread_started event")
        elif welcome is not None:
            welcome.thread_started(*started)

    app.event("app_mention")(on_message_event)
    app.event("assistant_thread_started")(on_thread_started)
    app.event("message")(on_message_event)
    app.event("agent_session_stopped")(on_stop)


def acknowledge_the_rest(app: AsyncApp) -> None:
    """Registered last: any other event is acknowledged and ignored, so Slack does not deliver
    it again and again (Bolt would answer 404, and in Socket Mode not acknowledge at all)."""

    async def ignore(body: dict[str, Any]) -> None:
        log.debug("ignored event %s", (body.get("event") or {}).get("type"))

    app.event(re.compile(".*"))(ignore)
