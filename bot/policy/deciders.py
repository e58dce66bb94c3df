"""The parts of a one-door ruling that are plain functions of what was decided
(`bot.policy.one_door`): what a proposal keeps of it, the rule's content hash grants are bound
to, and which deciders and votes count under it."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from datetime import timedelta
from typing import Any

from bot.approvals.escalation import ladder, ladder_start
from bot.approvals.policy import GroupMembers
from bot.approvals.ruling import Question, Ruling
from bot.db.models import utcnow
from bot.durations import parse_duration
from bot.policy.engine import Decision
from bot.policy.model import Rule


def rule_hash(rule: Rule | None) -> str | None:
    """A rule's content: a grant is bound to it, and any change to the rule voids the grant."""
    if rule is None:
        return None
    return hashlib.sha256(rule.model_dump_json().encode()).hexdigest()[:24]


def record_of(decision: Decision, question: Question) -> dict[str, Any]:
    """What a proposal keeps of a ruling: the decision, the rule's content hash, the counts it
    was made on and, where the rule offers grants, the tool's definition they are bound to."""
    kept = decision.record()
    ask = decision.ask
    kept["rule_hash"] = rule_hash(ask) if decision.outcome == "ask" else None
    kept["counts"] = list(question.counts)
    if decision.failed_closed:
        kept["four_eyes"] = True  # never decided by the requester alone
        kept.pop("grants", None)
        kept.pop("grant_expiry", None)
    if decision.after_untrusted == "ask" and kept.get("escalate"):
        # After input no allow or grant covers, nor does an escalation's allow: nobody
        # answering must not run what someone else's text may have steered.
        steps = [e for e in kept["escalate"] if e.get("outcome") != "allow"]
        if steps:
            kept["escalate"] = steps
        else:
            kept.pop("escalate")
    if decision.outcome == "ask" and ask is not None and kept.get("grants"):
        if question.definition:
            kept["definition"] = question.definition
        if ask.grant_expiry:
            kept["grant_expiry_seconds"] = parse_duration(ask.grant_expiry).total_seconds()
    return kept


def with_(ruling: Ruling, **changes: Any) -> Ruling:
    return replace(ruling, **changes)


def recorded_deciders(ruling: Ruling, q: Question) -> Ruling:
    """Under an allow, who may still click the waiting card: the people it was made for."""
    kept = q.recorded or {}
    if kept.get("outcome") != "ask":
        plain = {**ruling.record, "approvers": [], "four_eyes": False}
        return with_(ruling, outcome="ask", record=plain)
    return with_(ruling, outcome="ask", record=kept, failed_closed=bool(kept.get("failed_closed")))


def escalated_to(ruling: Ruling, q: Question) -> list[str]:
    """People the ladder added, while the rule that climbed it is still the one in force."""
    kept = q.recorded or {}
    if kept.get("rule") != ruling.rule or kept.get("rule_hash") != ruling.record.get("rule_hash"):
        return []
    return [str(a) for a in kept.get("escalated_to") or ()]


def ladder_allows(ruling: Ruling, q: Question) -> bool:
    """An `escalation` vote counts while the rule in force (unchanged) ends its ladder with an
    allow that is due."""
    kept = q.recorded or {}
    if ruling.failed_closed or kept.get("rule_hash") != ruling.record.get("rule_hash"):
        return False
    steps = ladder(ruling.record)
    if not steps or steps[-1].kind != "allow" or q.created_at is None:
        return False
    started = ladder_start(kept, q.created_at)
    return started + steps[-1].after <= utcnow() + timedelta(seconds=1)


async def is_approver(approvers: list[str], user: str, groups: GroupMembers) -> bool:
    if user in approvers:
        return True
    for entry in approvers:
        if entry.startswith("S") and user in await groups.members(entry):
            return True
    return False
