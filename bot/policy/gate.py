"""The pieces the one door (`bot.policy.one_door`) decides calls with: the counts of earlier
calls, the user groups the rules ask about, and deciding off the event loop when a condition
is slow."""

from __future__ import annotations

import asyncio
import logging
import re
from datetime import UTC, datetime

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from bot.db.models import PolicyDecision
from bot.policy.engine import Decision, Facts, applicable, decide, decides_quickly
from bot.policy.model import PolicyFile

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
