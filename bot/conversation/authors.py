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
the way Slack links a reply (with `thread_ts` and `cid`), so a card can link to it.
"""

from __future__ import annotations

import logging
import time
import weakref
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.caches import BoundedCache
from bot.membership import is_full_member
from bot.provenance import Kind, Source

log = logging.getLogger(__name__)

MESSAGE = "message"
KIND_SECONDS = 600.0


def kind_of(user: dict[str, Any], team: str | None) -> Kind:
    """A person's kind from their `users.info` record and the bot's own workspace."""
    if user.get("is_restricted") or user.get("is_ultra_restricted"):
        return "guest"
    if user.get("is_stranger") or not is_full_member({**user, "deleted": False}, team):
        return "external"
    return "member"


def permalink(base: str | None, channel: str, ts: str, thread_ts: str | None) -> str | None:
    """Slack's permalink of a message (a reply's opens its thread at it)."""
    if not base or not base.startswith("https://") or not ts:
        return None
    link = f"{base.rstrip('/')}/archives/{channel}/p{ts.replace('.', '')}"
    if thread_ts and thread_ts != ts:
        link += f"?thread_ts={thread_ts}&cid={channel}"
    return link


class Authors:
    """Kinds of authors (bounded cache) and the workspace's URL, per Slack client."""

    def __init__(self, slack: AsyncWebClient) -> None:
        self.slack = slack
        self._kinds: BoundedCache[str, tuple[float, Kind]] = BoundedCache(5_000)
        self._workspace: tuple[str | None, str | None] | None = None

    async def workspace(self) -> tuple[str | None, str | None]:
        """The bot's team id and the workspace's URL (None, None when Slack cannot say)."""
        if self._workspace is None:
            try:
                found = await self.slack.auth_test()
            except Exception as exc:  # asked again next time
                log.warning("no workspace URL for permalinks: %s", type(exc).__name__)
                return None, None
            self._workspace = (
                str(found.get("team_id") or "") or None,
                str(found.get("url") or "") or None,
            )
        return self._workspace

    async def kind(self, user: str) -> Kind:
        """A person's kind now (asked of Slack again after `KIND_SECONDS`: a member may become
        a guest)."""
        if user in self._kinds and time.monotonic() - self._kinds[user][0] < KIND_SECONDS:
            return self._kinds[user][1]
        try:
            found = dict((await self.slack.users_info(user=user)).get("user") or {})
        except Exception as exc:  # not remembered: asked again next time
            log.warning("could not tell who %s is: %s", user, type(exc).__name__)
            return "guest"
        team, _ = await self.workspace()
        kind = kind_of(found, team)
        self._kinds[user] = (time.monotonic(), kind)
        return kind

    async def of_person(self, user: str, channel: str, ts: str, thread_ts: str | None) -> Source:
        """A person's message as a source (its kind known now; the requester's own words are
        decided at prompt time)."""
        _, base = await self.workspace()
        link = permalink(base, channel, ts, thread_ts)
        return Source(await self.kind(user), MESSAGE, author=user, link=link)

    async def of_app(self, name: str, channel: str, ts: str, thread_ts: str | None) -> Source:
        """Another app's message (see the module's docstring: `external`)."""
        _, base = await self.workspace()
        shown = " ".join(name.split())[:80]
        return Source(
            "external",
            f"message from the app {shown}" if shown else "message from an app",
            link=permalink(base, channel, ts, thread_ts),
        )


_AUTHORS: weakref.WeakKeyDictionary[AsyncWebClient, Authors] = weakref.WeakKeyDictionary()


def authors_of(slack: AsyncWebClient) -> Authors:
    found = _AUTHORS.get(slack)
    if found is None:
        found = _AUTHORS[slack] = Authors(slack)
    return found
