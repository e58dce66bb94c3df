"""The policy's screen of read tools (a deny rule may name one), and the pieces the one door
(`bot.policy.one_door`) decides write calls with: the counts of earlier calls, the user
groups the rules ask about, and deciding off the event loop when a condition is slow."""

from __future__ import annotations

import asyncio
import logging
import re
from datetime import UTC, datetime
from typing import Any

from slack_sdk.errors import SlackApiError
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from bot.approvals.policy import GroupMembers
from bot.db.models import PolicyDecision
from bot.db.session import Database
from bot.policy.engine import Decision, Facts, applicable, decide, decides_quickly, names_tool
from bot.policy.model import PolicyFile
from bot.policy.source import PolicySource

log = logging.getLogger(__name__)

_GROUP_ID = re.compile(r"\bS[A-Z0-9]{2,}\b")


def referenced_groups(policy: PolicyFile) -> set[str]:
    """User groups the rules ask about: `groups:` lists and S… ids in conditions."""
    found: set[str] = set()
    for rule in policy.rules:
        found.update(rule.groups)
        found.update(_GROUP_ID.findall(rule.when or ""))
    return found


def start_of_today() -> datetime:
    now = datetime.now(UTC)
    return now.replace(hour=0, minute=0, second=0, microsecond=0)


async def counts(
    session: AsyncSession, tool: str, channel: str, thread_ts: str | None, requester: str
) -> tuple[int, int]:
    """Earlier calls of `tool` in this thread, and by this person today (UTC)."""
    in_thread = await session.scalar(
        select(func.count())
        .select_from(PolicyDecision)
        .where(
            PolicyDecision.step == "propose",
            PolicyDecision.tool_name == tool,
            PolicyDecision.channel_id == channel,
            PolicyDecision.thread_ts.is_(None)
            if thread_ts is None
            else PolicyDecision.thread_ts == thread_ts,
        )
    )
    today = await session.scalar(
        select(func.count())
        .select_from(PolicyDecision)
        .where(
            PolicyDecision.step == "propose",
            PolicyDecision.tool_name == tool,
            PolicyDecision.requester == requester,
            PolicyDecision.created_at >= start_of_today(),
        )
    )
    return int(in_thread or 0), int(today or 0)


async def decide_off_loop(policy: PolicyFile, version: str, facts: Facts) -> Decision:
    """`decide`, here when its conditions are quick (most: comparisons over a proposal's
    arguments, no thread to start or wake), else in a thread: a condition may take up to its
    time guard, and the event loop must not wait for it."""
    rules = applicable(policy, facts)
    if decides_quickly(rules, facts):
        return decide(policy, version, facts, rules)
    return await asyncio.to_thread(decide, policy, version, facts, rules)


class PolicyGate:
    def __init__(self, source: PolicySource, groups: GroupMembers, db: Database) -> None:
        self.source = source
        self.groups = groups
        self.db = db
        self._referenced: tuple[PolicyFile, list[str]] | None = None  # per policy in force

    def referenced(self, policy: PolicyFile) -> list[str]:
        """`referenced_groups` of the policy in force, found once per policy, not once per
        proposal (a pattern over every condition)."""
        if self._referenced is None or self._referenced[0] is not policy:
            self._referenced = (policy, sorted(referenced_groups(policy)))
        return self._referenced[1]

    async def groups_of(self, requester: str, policy: PolicyFile) -> tuple[str, ...] | None:
        """The referenced groups the requester is in; None if Slack could not tell."""
        member_of = []
        for group in self.referenced(policy):
            try:
                if requester in await self.groups.members(group):
                    member_of.append(group)
            except (SlackApiError, OSError, TimeoutError) as exc:
                log.warning("user group %s unreadable for the policy: %s", group, exc)
                return None
        return tuple(member_of)

    async def screen_read(
        self, tool: str, pack: str, arguments: dict[str, Any], channel: str, requester: str
    ) -> Decision | None:
        """A deny for a read tool, or None (most reads: no deny rule names them, and the
        decision costs nothing). Counts are not kept for reads: they are 0 here."""
        in_force = self.source.current
        named = [
            r
            for r in in_force.policy.rules
            if r.outcome == "deny" and not r.shadow and names_tool(r, tool, pack)
        ]
        if not named:
            return None
        groups = await self.groups_of(requester, in_force.policy)
        if groups is None:
            reason = "the user groups could not be read"
            return Decision("deny", None, in_force.version, reason)
        facts = Facts(tool, pack, arguments, channel, requester, groups, read_only=True)
        made = await decide_off_loop(in_force.policy, in_force.version, facts)
        return made if made.outcome == "deny" else None
