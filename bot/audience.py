"""Who may read a piece of stored data: its audience.

An audience is a set of clauses, and a reader must satisfy every one of them:
`C:<channel>` (whoever may read that channel: its members, and for a public channel every full
member of the workspace) and `U:<user>` (that one person). No clause at all means anyone in the
workspace who may use the bot. It is stored as text, the clauses sorted and space-separated,
so `narrowest` (what a mix of data may be shown to) is the union of the clauses.

Where audiences come from:
- a person's message: the channel it was posted in (`C:…`), or in a DM that person (`U:…`);
- a read tool's result: what the tool declares in its `Outcome.audience` (the slack pack: the
  channel it read). Packs that read through a workspace-wide credential (GitHub, Linear, MCP)
  declare nothing: anyone in the workspace could have asked the bot for the same text, so their
  results are the workspace's;
- a reply the model wrote (and a summary, a proposal): the narrowest of what its prompt held.

Pure functions, no I/O: who satisfies a clause is asked of Slack by `bot.membership.Reach`.
"""

from __future__ import annotations

from collections.abc import Iterable

WORKSPACE = ""


def channel(channel_id: str) -> str:
    return f"C:{channel_id}"


def person(user_id: str) -> str:
    return f"U:{user_id}"


def place(channel_id: str, user_id: str, is_dm: bool) -> str:
    """Who reads what is said in `channel_id`: a DM with the bot is its one person's."""
    return person(user_id) if is_dm or channel_id.startswith("D") else channel(channel_id)


def clauses(audience: str | None) -> frozenset[str]:
    return frozenset(c for c in (audience or "").split() if c)


def narrowest(*audiences: str | None) -> str:
    """What data of all these audiences may be shown to: readers of every one of them."""
    found: set[str] = set()
    for audience in audiences:
        found |= clauses(audience)
    return " ".join(sorted(found))


def narrowest_of(audiences: Iterable[str | None]) -> str:
    return narrowest(*audiences)
