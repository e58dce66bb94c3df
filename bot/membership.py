"""Channel membership and reach, asked of Slack's Web API. Neutral ground: the tools (acting
for a requester), the conversation (which messages a requester's prompt may hold) and the Slack
surface (/history, /approvals) all decide reach with it.

Who may read a channel: a private channel, group DM or DM only its members; a public channel
its members and every full member of the workspace. Guests (`is_restricted`,
`is_ultra_restricted`) and people of another team (Slack Connect: `users.info` names another
`team_id`, or `is_stranger`) read only where they are members. Answers are cached briefly and
the caches are bounded; when Slack cannot answer, the answer is no.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections import OrderedDict
from typing import Any, Generic, TypeVar

from slack_sdk.web.async_client import AsyncWebClient

from bot.audience import clauses
from bot.provenance import Kind

log = logging.getLogger(__name__)

MEMBER_PAGES = 20  # 20,000 members at most are looked through
TTL_SECONDS = 60.0
CACHE_SIZE = 10_000

V = TypeVar("V")


async def is_member(slack: AsyncWebClient, channel: str, user: str) -> bool:
    return user in await members_of(slack, channel, until=user)


async def members_of(
    slack: AsyncWebClient, channel: str, until: str | None = None
) -> frozenset[str]:
    """The channel's members (the first `MEMBER_PAGES` pages; stops early once `until` is
    among them)."""
    found: set[str] = set()
    cursor: str | None = None
    for _ in range(MEMBER_PAGES):
        page = await slack.conversations_members(channel=channel, limit=1000, cursor=cursor)
        found.update(str(m) for m in page.get("members") or [])
        cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
        if not cursor or (until is not None and until in found):
            break
    return frozenset(found)


def is_private(info: dict[str, object]) -> bool:
    """Private channels, group DMs and DMs: readable by their members only."""
    return bool(info.get("is_private") or info.get("is_mpim") or info.get("is_im"))


def is_full_member(user: dict[str, Any], team: str | None) -> bool:
    """A member of this workspace who is neither a guest nor from another team."""
    if user.get("is_restricted") or user.get("is_ultra_restricted") or user.get("is_stranger"):
        return False
    if user.get("deleted"):
        return False
    home = user.get("team_id")
    teams = (user.get("enterprise_user") or {}).get("teams") or []  # Enterprise Grid
    return team is None or not home or home == team or team in teams


def kind_of(user: dict[str, Any], team: str | None) -> Kind:
    """A person's kind from their `users.info` record and the bot's own workspace: a `guest`
    (`is_restricted`, `is_ultra_restricted`), `external` (Slack Connect: another team, or
    `is_stranger`) or a full `member` (a deleted account keeps the kind it had)."""
    if user.get("is_restricted") or user.get("is_ultra_restricted"):
        return "guest"
    if user.get("is_stranger") or not is_full_member({**user, "deleted": False}, team):
        return "external"
    return "member"


class _Cache(Generic[V]):
    """Answers kept for `ttl` seconds, at most `size` of them (the oldest go first)."""

    def __init__(self, ttl: float = TTL_SECONDS, size: int = CACHE_SIZE) -> None:
        self.ttl, self.size = ttl, size
        self._items: OrderedDict[Any, tuple[float, V]] = OrderedDict()

    def get(self, key: Any) -> tuple[bool, V | None]:
        found = self._items.get(key)
        if found is None or time.monotonic() - found[0] >= self.ttl:
            self._items.pop(key, None)
            return False, None
        return True, found[1]

    def clear(self) -> None:
        self._items.clear()

    def put(self, key: Any, value: V) -> None:
        self._items[key] = (time.monotonic(), value)
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)


class Reach:
    """What a person may read in Slack right now. One per Slack client (`reach_of`), so the
    tools and the surface share its caches."""

    def __init__(self, slack: AsyncWebClient) -> None:
        self.slack = slack
        self._auth: tuple[str | None, str | None] | None = None  # team id, workspace URL
        self._channels: _Cache[dict[str, object]] = _Cache()
        # Each person's kind and whether they are a full member now (one `users.info`).
        self._users: _Cache[tuple[Kind, bool]] = _Cache()
        self._reads: _Cache[bool] = _Cache()

    def forget(self) -> None:
        """Drop every cached answer (the next questions go to Slack)."""
        for cache in (self._channels, self._users, self._reads):
            cache.clear()

    async def workspace(self) -> str | None:
        """The bot's own workspace (its token's team)."""
        return (await self._identity())[0]

    async def site(self) -> str | None:
        """The workspace's URL (`https://acme.slack.com/`), which permalinks are made from."""
        return (await self._identity())[1]

    async def _identity(self) -> tuple[str | None, str | None]:
        if self._auth is None:
            found = await self.slack.auth_test()
            self._auth = (
                str(found.get("team_id") or "") or None,
                str(found.get("url") or "") or None,
            )
        return self._auth

    async def channel_info(self, channel: str) -> dict[str, object]:
        hit, info = self._channels.get(channel)
        if hit and info is not None:
            return info
        info = dict((await self.slack.conversations_info(channel=channel)).get("channel") or {})
        self._channels.put(channel, info)
        return info

    async def full_member(self, user: str, fresh: bool = False) -> bool:
        return (await self._person(user, fresh))[1]

    async def kind(self, user: str) -> Kind:
        """A person's kind (`kind_of`); one Slack cannot tell us about counts as a guest."""
        return (await self._person(user))[0]

    async def _person(self, user: str, fresh: bool = False) -> tuple[Kind, bool]:
        hit, person = (False, None) if fresh else self._users.get(user)
        if hit and person is not None:
            return person
        try:
            found = dict((await self.slack.users_info(user=user)).get("user") or {})
            team = await self.workspace()
        except Exception as exc:  # no answer: treated as a guest (members-only reach)
            log.warning("could not look up %s: %s", user, type(exc).__name__)
            return "guest", False
        person = (kind_of(found, team), is_full_member(found, team))
        self._users.put(user, person)
        return person

    async def can_read(self, channel: str, user: str, fresh: bool = False) -> bool:
        """Whether `user` may read `channel` now; `fresh`: asked of Slack now, not the cache
        (a decision on a write: membership and account type as they are at the click)."""
        hit, allowed = (False, None) if fresh else self._reads.get((channel, user))
        if hit and allowed is not None:
            return allowed
        try:
            allowed = await self._ask(channel, user, fresh)
        except Exception as exc:  # no answer, no access
            log.warning("could not check access to %s: %s", channel, type(exc).__name__)
            return False
        self._reads.put((channel, user), allowed)
        return allowed

    async def _ask(self, channel: str, user: str, fresh: bool = False) -> bool:
        info = await self.channel_info(channel)
        if not is_private(info) and await self.full_member(user, fresh):
            return True
        return await is_member(self.slack, channel, user)

    async def is_public(self, channel: str) -> bool:
        try:
            return not is_private(await self.channel_info(channel))
        except Exception as exc:  # unknown: treated as private
            log.warning("could not look up %s: %s", channel, type(exc).__name__)
            return False

    async def may_read(
        self, user: str, audience: str | None, where: str | None = None, fresh: bool = False
    ) -> bool:
        """Whether `user` satisfies every clause of `audience`; `where` is a clause known to
        hold (the place they are asking in: Slack just delivered their message from there);
        `fresh`: membership and account type read from Slack now."""
        for clause in sorted(clauses(audience)):
            if clause == where:
                continue
            kind, _, target = clause.partition(":")
            if kind == "U" and target != user:
                return False
            if kind == "C" and not await self.can_read(target, user, fresh):
                return False
            if kind not in ("U", "C"):
                return False  # a clause this code does not know: nobody
        return True

    async def covers(self, place: str, audience: str | None) -> bool:
        """Whether everyone who reads `place` (an audience of one clause: where a reply is
        posted) may read data of `audience`. A person's own place covers what they may read;
        a channel covers its own data and public channels' data (the workspace's); a private
        channel's data or one person's is wider nowhere else."""
        kind, _, target = place.partition(":")
        for clause in clauses(audience):
            if clause == place:
                continue
            if kind == "U":
                if not await self.may_read(target, clause):
                    return False
                continue
            ckind, _, ctarget = clause.partition(":")
            if ckind != "C" or not await self.is_public(ctarget):
                return False
        return True


_REACH: weakref.WeakKeyDictionary[AsyncWebClient, Reach] = weakref.WeakKeyDictionary()


def reach_of(slack: AsyncWebClient) -> Reach:
    """The `Reach` of this Slack client (made on first use)."""
    found = _REACH.get(slack)
    if found is None:
        found = _REACH[slack] = Reach(slack)
    return found
