"""A reply that would carry data to a wider audience than the data's own goes to its requester
alone.

Before each model request the turn compares the narrowest audience of what the prompt holds
with the place the reply is posted in (`Reach.covers`). Once it is wider there, the text the
model writes is held back from the thread: the requester gets it privately (an ephemeral
message in the thread, or a DM when Slack refuses that) and the thread gets `SENT_PRIVATELY`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.audience import narrowest
from bot.conversation.sources import newest_last
from bot.errors import slack_error
from bot.membership import reach_of
from bot.poster import PostRefused, poster_of
from bot.provenance import Source
from bot.slack.render import to_mrkdwn
from bot.slack.split import split_message
from bot.slack.streamer import ReplyStream

log = logging.getLogger(__name__)

SENT_PRIVATELY = (
    ":lock: _I sent this answer privately to the person who asked: it draws on what not "
    "everyone here may read._"
)
NOT_SENT = (
    ":warning: _This answer draws on what not everyone here may read, and Slack would not "
    "take it privately; please ask me in a DM._"
)
PRIVATE_PART = 3000  # characters per private message


@dataclass
class TurnAudience:
    """What a turn's prompts held, and whether its reply goes to the requester alone."""

    place: str  # who reads the thread the reply is posted in (`bot.audience.place`)
    audience: str = ""  # the narrowest audience of the latest prompt
    # Every untrusted source the latest prompt held, newest last (`bot.conversation.sources`)
    sources: list[Source] = field(default_factory=list)
    private: bool = False
    held: list[str] = field(default_factory=list)  # text kept from the thread

    async def prompt_held(
        self, slack: AsyncWebClient, audience: str, sources: list[Source]
    ) -> None:
        """What the turn's latest prompt held. A later round of the same turn keeps what the
        earlier ones held: the model read it in this turn (its calls and words may carry it)
        even when it has left the window, as older messages do when no summary can be made."""
        self.audience = narrowest(self.audience, audience)
        self.sources = newest_last([*self.sources, *sources])
        if not self.private and not await reach_of(slack).covers(self.place, audience):
            self.private = True

    def take(self) -> str:
        text, self.held = "".join(self.held), []
        return text


async def send_privately(
    slack: AsyncWebClient,
    channel: str,
    thread_ts: str | None,
    user: str,
    text: str,
    carries: str,
) -> bool:
    """`text` (Markdown, of audience `carries`) to `user` alone; False when Slack (or the
    poster: `user` may not read it) took none of it."""
    parts = split_message(to_mrkdwn(text), PRIVATE_PART) or []
    poster = poster_of(slack)
    try:
        for part in parts:
            await poster.ephemeral(channel, user, part, carries=carries, thread_ts=thread_ts)
        return True
    except PostRefused:
        return False
    except SlackApiError as exc:
        log.warning("could not answer privately in %s: %s", channel, slack_error(exc))
    try:
        opened = await slack.conversations_open(users=user)
        dm = str((opened.get("channel") or {}).get("id") or "")
        for part in parts:
            await poster.post(dm, part, carries=carries, reader=user)
        return True
    except PostRefused:
        return False
    except SlackApiError as exc:
        log.warning("could not answer privately by DM: %s", slack_error(exc))
        return False


async def deliver_held(
    slack: AsyncWebClient, stream: ReplyStream, channel: str, requester: str, seen: TurnAudience
) -> None:
    """Text held back from the thread goes to the requester alone; the thread says so."""
    text = seen.take()
    if not text.strip():
        return
    sent = await send_privately(slack, channel, stream.thread_ts, requester, text, seen.audience)
    if stream.source.strip():
        stream.append("\n\n")
    stream.append(SENT_PRIVATELY if sent else NOT_SENT)
