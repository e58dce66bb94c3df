"""`countersign policy replay`: every revision decided since a time (a proposal's first, each
Edit's, and the one that ran), decided again under a policy from the inputs recorded with its
last decision: how many asks it would have removed, which past approvals it would have denied
and which denials it would have allowed."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import select

from bot.approvals.questions import recorded_context
from bot.db.models import PolicyDecision, Proposal
from bot.db.session import Database
from bot.durations import parse_duration
from bot.policy.engine import Facts, decide
from bot.policy.model import PolicyError, PolicyFile
from bot.policy.source import read_file
from bot.policy.untrusted import with_context
from bot.provenance import sources_of
from bot.states import State

APPROVED = {State.APPROVED, State.EXECUTING, State.SUCCEEDED, State.FAILED, State.UNKNOWN}


@dataclass
class Replayed:
    decisions: int = 0
    asks_removed: int = 0
    approvals_denied: list[str] = field(default_factory=list)
    denials_allowed: list[str] = field(default_factory=list)


def _who(row: PolicyDecision) -> str:
    """The revision replayed: a proposal's (`proposal 4 revision 2`) or a denied call's."""
    which = (
        f"proposal {row.proposal_id} revision {row.revision}"
        if row.proposal_id
        else f"denied call #{row.id}"
    )
    return f"{which}: {row.tool_name} by {row.requester} in {row.channel_id}"


async def compare(db: Database, policy: PolicyFile, version: str, since: datetime) -> Replayed:
    async with db.transaction() as session:
        rows = (
            await session.execute(
                select(PolicyDecision, Proposal)
                .outerjoin(Proposal, Proposal.id == PolicyDecision.proposal_id)
                .where(PolicyDecision.created_at >= since)
                .order_by(PolicyDecision.id)
            )
        ).all()
    latest: dict[tuple[object, ...], tuple[PolicyDecision, Proposal | None]] = {}
    for decided, made in rows:  # the last decision of each decided revision
        key = (
            ("p", decided.proposal_id, decided.revision)
            if decided.proposal_id
            else ("d", decided.id)
        )
        latest[key] = (decided, made)
    found = Replayed(len(latest))
    for row, proposal in latest.values():
        groups, context = recorded_context(row.groups)
        sources = [s for s in context.get("sources") or () if isinstance(s, dict)]
        facts = Facts(
            row.tool_name,
            row.pack,
            dict(row.arguments),
            row.channel_id,
            row.requester,
            groups,
            row.calls_in_thread,
            row.calls_today,
            read_only=bool(context.get("read")),
            open_world=bool(context.get("open_world")),
        )
        facts = with_context(facts, sources_of(sources))
        now = decide(policy, version, facts)
        if row.outcome == "ask" and now.outcome != "ask":
            found.asks_removed += 1
        by_person = (
            proposal is not None
            and State(proposal.state) in APPROVED
            and (proposal.approved_revision or 1) == row.revision
            and not str(proposal.decided_by or "").startswith("policy:")
        )
        if by_person and now.outcome == "deny":
            assert proposal is not None
            found.approvals_denied.append(
                f"{_who(row)}, approved by {proposal.decided_by}: denied by {now.rule}"
            )
        declined = (
            proposal is not None
            and State(proposal.state) is State.DECLINED
            and proposal.revision == row.revision
        )
        if (row.outcome == "deny" or declined) and now.outcome == "allow":
            was = f"denied by {row.rule}" if row.outcome == "deny" else "declined by a person"
            found.denials_allowed.append(
                f"{_who(row)}, {was}: allowed by {now.rule or 'the default'}"
            )
    return found


def replay(path: Path, since_text: str, database_url: str) -> int:
    try:
        since = datetime.now(UTC) - parse_duration(since_text)
        policy, version = read_file(path)
    except (PolicyError, ValueError) as exc:
        print(f"{path}: {exc}", file=sys.stderr)
        return 2

    async def go() -> Replayed:
        from bot.db.migrate import upgrade_to_head

        db = Database.from_url(database_url)
        try:
            await upgrade_to_head(db)
            return await compare(db, policy, version, since)
        finally:
            await db.dispose()

    found = asyncio.run(go())
    print(f"replayed {found.decisions} decision(s) since {since:%Y-%m-%d %H:%M} UTC")
    print(f"under {path} (version {version})")
    print(f"asks it would have removed: {found.asks_removed}")
    print(f"past approvals it would have denied: {len(found.approvals_denied)}")
    for line in found.approvals_denied:
        print(f"  {line}")
    print(f"denials it would have allowed: {len(found.denials_allowed)}")
    for line in found.denials_allowed:
        print(f"  {line}")
    return 0
