"""Thumbs up or down on a finished answer: a `context_actions` block with `feedback_buttons`
at the end of the answer, and the click stored with the message and the person (see
`bot/records/feedback.py`), acknowledged privately."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_sdk.models.blocks import (
    ContextActionsBlock,
    FeedbackButtonObject,
    FeedbackButtonsElement,
)

from bot.db.session import Database
from bot.records import feedback
from bot.slack.access import ChannelAccess
from bot.slack.payloads import BadPayload, _dict, _str, _user
from bot.tasks import TaskGroup

log = logging.getLogger(__name__)

FEEDBACK = "answer_feedback"
THANKS = {
    "good": "Thanks: you marked this answer as helpful.",
    "bad": "Thanks: you marked this answer as not helpful. Reply in the thread to say what "
    "was wrong, and I will try again.",
}
Tell = Callable[[str, str, str, str | None], Awaitable[None]]


def feedback_block() -> dict[str, Any]:
    return ContextActionsBlock(
        elements=[
            FeedbackButtonsElement(
                action_id=FEEDBACK,
                positive_button=FeedbackButtonObject(
                    text="Good answer", accessibility_label="This answer helped", value="good"
                ),
                negative_button=FeedbackButtonObject(
                    text="Bad answer", accessibility_label="This answer did not help", value="bad"
                ),
            )
        ]
    ).to_dict()


def parse_feedback(
    body: dict[str, Any],
) -> tuple[str, str, str, str, feedback.Value, str | None]:
    """(team, channel, message ts, user, value, thread ts) of a feedback click."""
    actions = body.get("actions")
    action = _dict(actions[0]) if isinstance(actions, list) and actions else {}
    value = action.get("value")
    if value not in ("good", "bad"):
        raise BadPayload("not a feedback value")
    user = _user(body)
    container, message = _dict(body.get("container")), _dict(body.get("message"))
    channel = _str(container.get("channel_id"), 32) or _str(_dict(body.get("channel")).get("id"))
    ts = _str(container.get("message_ts"), 32) or _str(message.get("ts"), 32)
    team = _str(_dict(body.get("team")).get("id"), 32) or _str(
        _dict(body.get("user")).get("team_id"), 32
    )
    if not channel or not ts or not team:
        raise BadPayload("no message")
    verdict: feedback.Value = "good" if value == "good" else "bad"
    return team, channel, ts, user, verdict, _str(message.get("thread_ts"), 32)


def register(
    app: AsyncApp, db: Database, tell: Tell, tasks: TaskGroup, access: ChannelAccess
) -> None:
    async def store(body: dict[str, Any]) -> None:
        try:
            team, channel, ts, user, value, thread_ts = parse_feedback(body)
        except BadPayload as exc:
            log.info("refused a feedback payload: %s", exc)
            return
        stored = await access.can_read(channel, user) and await feedback.record(
            db, team, channel, ts, user, value
        )
        text = THANKS[value] if stored else "That button was not made by Countersign."
        await tell(channel, user, text, thread_ts)

    @app.action(FEEDBACK)
    async def _clicked(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        tasks.spawn(store(body), name="feedback")
