"""What a card needs to know about its arguments beyond their characters: each one's kind and
label (from the tool's schema), and the people they name as `@name`.

A card is posted in a channel, and a `<@U…>` in a posted message notifies that person: a model
told to (an injected instruction in an issue it read) could list many people. So the card never
mentions a person the arguments name; it shows their name, looked up with `users.info`, as
`@name` (with the real name beside it when that says more), which looks like a mention and
notifies nobody.
"""

from __future__ import annotations

import logging
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.caches import BoundedCache
from bot.db.models import Proposal
from bot.provenance import sources_of
from bot.slack.card_fields import USER_ID
from bot.tools.catalog import ToolRegistry
from bot.tools.field_kinds import FieldKind, Kind, field_kinds
from bot.tools.registry import Tool

log = logging.getLogger(__name__)

MAX_LOOKUPS = 20  # people looked up for one card; the rest are shown as sent


def kinds_of(tool: Tool[Any] | None) -> dict[str, FieldKind]:
    """Each argument's kind and label, by name, from the tool's JSON schema."""
    if tool is None:
        return {}
    try:
        schema = tool.input_schema or tool.arguments.model_json_schema()
    except Exception as exc:  # a schema pydantic cannot write: labels from names alone
        log.warning("no schema for %s: %s", tool.name, type(exc).__name__)
        return {}
    return {kind.name: kind for kind in field_kinds(schema)}


def people_in(arguments: dict[str, Any], kinds: dict[str, FieldKind]) -> list[str]:
    """The Slack user ids the arguments name where their schema says they are people."""
    found: list[str] = []
    for name, spec in kinds.items():
        value = arguments.get(name)
        if spec.kind is Kind.USER:
            items = [value]
        elif spec.kind is Kind.USERS and isinstance(value, list):
            items = value
        else:
            continue
        found += [v for v in items if isinstance(v, str) and USER_ID.match(v) and v not in found]
    return found


def authors_in(proposal: Proposal) -> list[str]:
    """The Slack users whose messages or files the proposal's turn had read (its sources)."""
    found: list[str] = []
    for source in sources_of(proposal.provenance):
        author = source.author or ""
        if source.kind != "tool" and USER_ID.match(author) and author not in found:
            found.append(author)
    return found


def _one_line(name: Any) -> str:
    """A profile's name on one line: it sits beside a label on the card, and a line break in
    it would read as another field."""
    return " ".join(str(name or "").split())


def shown_name(user: dict[str, Any]) -> str | None:
    """`@display name`, with the real name beside it when it differs (two people may share a
    display name; the approver should see which one)."""
    profile = user.get("profile") or {}
    display = _one_line(profile.get("display_name") or user.get("name"))
    real = _one_line(user.get("real_name") or profile.get("real_name"))
    if not display:
        return f"@{real}" if real else None
    same = not real or real.casefold() == display.casefold()
    return f"@{display}" if same else f"@{display} ({real})"


class PeopleNames:
    """`@name` for user ids, from `users.info`, remembered (a bounded cache)."""

    def __init__(self, slack: AsyncWebClient) -> None:
        self.slack = slack
        self._names: BoundedCache[str, str | None] = BoundedCache(2_000)

    async def named_in(self, registry: ToolRegistry, proposal: Proposal) -> dict[str, str]:
        """`@name` of each person the proposal's arguments name, and of each person whose
        message or file the turn had read before proposing it (its "Proposed after reading")."""
        kinds = kinds_of(registry.get(proposal.tool_name))
        named = people_in(dict(proposal.arguments), kinds)
        return await self.names(named + [a for a in authors_in(proposal) if a not in named])

    async def names(self, users: list[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        for user in users[:MAX_LOOKUPS]:
            name = self._names[user] if user in self._names else await self._look_up(user)
            if name:
                found[user] = name
        return found

    async def _look_up(self, user: str) -> str | None:
        try:
            info = await self.slack.users_info(user=user)
        except Exception as exc:  # unknown or unreachable: shown as sent, with a note
            log.info("no name for a person on a card: %s", type(exc).__name__)
            return None  # not remembered: the next card asks again
        name = self._names[user] = shown_name(dict(info.get("user") or {}))
        return name
