"""Who wrote a Slack message, as a prompt's source (`bot.provenance.Source`), decided when the
message is stored.

A person is a full `member` of the workspace, a `guest` (`is_restricted`,
`is_ultra_restricted`) or `external` (Slack Connect: `users.info` names another `team_id`, or
`is_stranger`); what Slack cannot tell us is treated as a guest (untrusted and outside, the
careful side). Whether a message is the requester's own words is decided when a prompt is made
(`bot.conversation.sources`): Alice's message is trusted in Alice's turn, not in Bob's.

Another app's message is `external`: an app relays what others wrote (an incoming webhook,
an e-mail bridge, a feed) and nobody in the workspace vouches for it, so, like another
organisation's message, an allow rule or a grant does not cover a call proposed after it.

Each message carries its permalink, built from the workspace's URL (`auth.test`, asked once)
the way Slack links a reply (with `thread_ts` and `cid`), so a card can link to it. Kinds and
the URL come from the Slack client's `Reach` (`bot.membership`), which keeps them with the rest
of what Slack says about people, so a person is looked up once for both.
"""

from __future__ import annotations

import logging

from slack_sdk.web.async_client import AsyncWebClient

from bot.membership import reach_of
from bot.provenance import Source

log = logging.getLogger(__name__)

MESSAGE = "message"


def permalink(base: str | None, channel: str, ts: str, thread_ts: str | None) -> str | None:
    """Slack's permalink of a message (a reply's opens its thread at it)."""
    if not base or not base.startswith("https://") or not ts:
        return None
    link = f"{base.rstrip('/')}/archives/{channel}/p{ts.replace('.', '')}"
    if thread_ts and thread_ts != ts:
        link += f"?thread_ts={thread_ts}&cid={channel}"
    return link


class Authors:
    """Messages as sources, for one Slack client."""

    def __init__(self, slack: AsyncWebClient) -> None:
        self.reach = reach_of(slack)

    async def _link(self, channel: str, ts: str, thread_ts: str | None) -> str | None:
        try:
            base = await self.reach.site()
        except Exception as exc:  # asked again next time; the source goes without a link
            log.warning("no workspace URL for permalinks: %s", type(exc).__name__)
            return None
        return permalink(base, channel, ts, thread_ts)

    async def of_person(self, user: str, channel: str, ts: str, thread_ts: str | None) -> Source:
        """A person's message as a source (its kind known now; the requester's own words are
        decided at prompt time)."""
        link = await self._link(channel, ts, thread_ts)
        return Source(await self.reach.kind(user), MESSAGE, author=user, link=link)

    async def of_app(self, name: str, channel: str, ts: str, thread_ts: str | None) -> Source:
        """Another app's message (see the module's docstring: `external`)."""
        shown = " ".join(name.split())[:80]
        return Source(
            "external",
            f"message from the app {shown}" if shown else "message from an app",
            link=await self._link(channel, ts, thread_ts),
        )


def authors_of(slack: AsyncWebClient) -> Authors:
    return Authors(slack)
