"""What the model reads in a proposal's `tool` message once it is settled: the outcome in
words it can act on (run, declined, changes asked, nobody answered, expired, withdrawn,
unknown, failed)."""

from __future__ import annotations

from typing import Any

from bot.approvals.machine import State
from bot.db.models import Proposal


def result_for_model(proposal: Proposal) -> dict[str, Any]:
    """What the model reads in the `tool` message once the proposal is settled."""
    state = State(proposal.state)
    if state is State.SUCCEEDED:
        return {"status": "succeeded", "result": proposal.result or {}}
    if state is State.DECLINED:
        return {
            "status": "declined",
            "reason": proposal.decline_reason or "no reason given",
            "instruction": "A person declined this action; it was not carried out. Do not "
            "repeat the same call; continue without it or ask what to do instead.",
        }
    if state is State.EXPIRED and proposal.decided_by == "escalation":
        return {
            "status": "nobody_answered",
            "instruction": "Nobody answered: no approver decided on this action before the "
            "policy's escalation ended it, so it was not carried out. Nobody declined it. Tell "
            "the person that no approver answered in time; propose it again only if they ask.",
        }
    if state is State.CHANGES_ASKED:
        return {
            "status": "changes_requested",
            "note": proposal.decline_reason or "no note given",
            "instruction": "A person who may approve this action asked for changes instead; "
            "it was not carried out. You may propose a revised action (a new call) that "
            "follows the note, or ask the requester what they want if the note is unclear.",
        }
    if state is State.EXPIRED:
        return {
            "status": "expired",
            "instruction": "Nobody approved this action in time; it was not carried out.",
        }
    if state is State.WITHDRAWN:
        return {
            "status": "withdrawn",
            "instruction": "The person stopped this turn before anyone decided; the action "
            "was not carried out. Do not repeat it unless asked again.",
        }
    if state is State.UNKNOWN:
        return {
            "status": "unknown",
            "error": proposal.error or "the outcome is unknown",
            "instruction": "This write may or may not have been carried out. Do not say it was "
            "done or that it failed, and do not call it again: a new call could write twice. "
            "Ask the person to check the destination; the card's Retry looks for the earlier "
            "write first where it can.",
        }
    return {"status": "failed", "error": proposal.error or "unknown error"}
