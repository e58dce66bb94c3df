"""What a tool runs with (`ToolContext`), and the errors a tool or its arguments raise."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar, cast

from bot.caches import BoundedCache
from bot.poster import ApprovedWrite, Poster, poster_of
from bot.provenance import Source

if TYPE_CHECKING:
    from slack_sdk.web.async_client import AsyncWebClient

    from bot.db.session import Database
    from bot.links import LinkSigner

R = TypeVar("R")
UNKNOWN_AUDIENCE = "X:unknown"  # a clause of no kind `bot.audience` knows: nobody reads it


@dataclass
class ToolContext:
    """What a tool may use; passed in, never global."""

    db: Database
    slack: AsyncWebClient
    team_id: str
    channel_id: str
    requester: str
    idempotency_key: str | None = None
    pin: str | None = None  # what the approved card was made against (e.g. a head commit)
    links: LinkSigner | None = None  # signed, expiring links to pages this bot serves
    # When a write of this proposal could first have happened (its approval): a look-up for
    # an earlier attempt's write reads the destination from here on, however busy it became.
    since: datetime | None = None
    # Who may read the approved proposal's data (`bot.audience`); None: not known here.
    audience: str | None = None
    _names: dict[str, str] = field(default_factory=lambda: BoundedCache[str, str](1_000))
    # What the approved revision's preview resolved (see `resolve`); None while previewing.
    pinned: dict[str, Any] | None = None
    # At run: names are never looked up again; `resolve` answers from `pinned` only.
    use_pinned: bool = False
    _resolved: dict[str, Any] = field(default_factory=dict, init=False, repr=False)

    async def resolve(self, key: str, lookup: Callable[[], Awaitable[R]]) -> R:
        """A name turned into what it names (a JSON value holding ids), recorded under `key`.

        Previewing: `lookup` runs and its answer is recorded (and stored with the proposal).
        Checking before a run (`pinned` set): `lookup` runs again so the executor can compare
        identities; a name that no longer finds one thing (renamed, or now matched twice) keeps
        the pinned id, which is what the card showed. Running (`use_pinned`): the pinned value,
        never a look-up, so a thing created or renamed since the card cannot receive the write.
        """
        pinned = self.pinned or {}
        if self.use_pinned:
            if key not in pinned:
                raise ToolError(
                    f"stale: {key} was not recorded when the card was made, so it cannot be "
                    "sent as shown; nothing was done. Ask the assistant to propose it afresh."
                )
            value = cast(R, pinned[key])
        else:
            try:
                value = await lookup()
            except ToolArgumentsError:
                if key not in pinned:
                    raise
                value = cast(R, pinned[key])
        self._resolved[key] = value
        return value

    @property
    def poster(self) -> Poster:
        """The one way to post to Slack (`bot.poster`)."""
        return poster_of(self.slack)

    @property
    def carries(self) -> str:
        """What a write of this proposal carries: its audience, or, unknown, a clause
        nobody satisfies (only an approval can then send it anywhere)."""
        return self.audience if self.audience is not None else UNKNOWN_AUDIENCE

    def approved_write(self) -> ApprovedWrite:
        """The approval a write tool shows the poster: the card of this proposal showed its
        destination and every character it sends. None without a proposal being run."""
        if not self.idempotency_key:
            raise ToolError("only an approved action may post; nothing was sent")
        return ApprovedWrite(self.idempotency_key)

    @property
    def resolutions(self) -> dict[str, Any]:
        return dict(self._resolved)

    async def user_label(self, user_id: str | None) -> str:
        """`@name` for display without pinging anyone (a `<@U…>` would notify them)."""
        if not user_id:
            return "nobody"
        if user_id not in self._names:
            try:
                info = await self.slack.users_info(user=user_id)
                user = info.get("user") or {}
                profile = user.get("profile") or {}
                name = profile.get("display_name") or user.get("real_name") or user.get("name")
                self._names[user_id] = f"@{name}" if name else user_id
            except Exception:  # a name is a nicety; the id is enough
                self._names[user_id] = user_id
        return self._names[user_id]


class ToolError(Exception):
    """A failure whose message is already in plain words (shown on the card as it is).

    `source`: set when the message carries words from outside (an MCP server's own error
    text): the error then reaches the model as that source's data, and counts as untrusted
    input for what follows, like the tool's result would (design promise 9)."""

    def __init__(self, message: str = "", *, source: Source | None = None) -> None:
        super().__init__(message)
        self.source = source


def said_by(exc: BaseException) -> Source | None:
    """The outside source whose words an error carries (`ToolError.source`), if any."""
    found = getattr(exc, "source", None)
    return found if isinstance(found, Source) else None


class OutcomeUnknown(Exception):
    """The write may or may not have happened (the request went out, its answer did not come
    back or could not be read). A tool raises it to say so; the action becomes `unknown`, never
    `failed`, and a retry first looks for the earlier write. The message is in plain words."""


class ToolArgumentsError(Exception):
    """Arguments that are not JSON or do not fit the schema; the message goes to the model."""
