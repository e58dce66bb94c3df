"""The arguments of the `slack` pack's tools, with Slack's own limits at the destination."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, field_validator

from bot.text import escape

CHANNEL = Field(
    pattern=r"^[CG][A-Z0-9]{2,}$", max_length=32, description="channel id, e.g. C012ABC"
)
# Slack's limits at the destination: chat.postMessage answers msg_too_long for text much over
# 4,000 characters (and truncates past 40,000), counted after our escaping of &, <, >;
# conversations.setTopic takes 250 characters.
MESSAGE_MAX = 4000
TOPIC_MAX = 250


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class ChannelInfo(_Args):
    channel: str = CHANNEL


class RecentMessages(_Args):
    channel: str = CHANNEL
    limit: int = Field(20, ge=1, le=100)


class LookupUser(_Args):
    user: str | None = Field(None, pattern=r"^[UW][A-Z0-9]{2,}$", description="user id")
    email: str | None = Field(None, max_length=200, description="or the user's email")


def _postable(text: str) -> str:
    sent = len(escape(text))
    if sent > MESSAGE_MAX:
        raise ValueError(
            f"the message is {sent} characters as sent (& < > count as &amp; &lt; &gt;); "
            f"Slack takes at most {MESSAGE_MAX}: shorten it or split it"
        )
    return text


class PostMessage(_Args):
    channel: str = CHANNEL
    text: str = Field(min_length=1, max_length=MESSAGE_MAX)

    _fits = field_validator("text")(_postable)


class ScheduleMessage(_Args):
    channel: str = CHANNEL
    text: str = Field(min_length=1, max_length=MESSAGE_MAX)
    post_at: datetime = Field(description="when to post, ISO 8601 with a time zone")

    _fits = field_validator("text")(_postable)


class SetChannelTopic(_Args):
    channel: str = CHANNEL
    topic: str = Field(max_length=TOPIC_MAX)
