"""`countersign audit export`: the audit trail, one row per proposal, as CSV or JSON lines.

`--records feedback` writes the feedback people gave on answers instead (who, which answer,
good or bad, when).

Each row says who proposed what (tool and the hash of the exact arguments), who approved or
declined it and why, when each step happened, and how it ended. `decision` is the proposal's
state (`changes_asked`: an approver sent it back with the note in `reason`; the model may have
proposed a revised action, which is a row of its own). JSON lines also carry every
audit event of the proposal.

Who decided, who approved, when, and the state come from the proposal's rows in its
workspace's audit chain, the rows `audit verify` checks, not from the proposal's own columns,
which nobody chains: an edit of `proposals.decided_by` does not change what the export says.
"""

from __future__ import annotations

import csv
import json
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any, TextIO

from sqlalchemy import select

from bot.db.models import AuditEntry, Proposal
from bot.db.session import Database
from bot.records.feedback import FEEDBACK_COLUMNS, feedback_rows

COLUMNS = [
    "proposal_id",
    "tool",
    "description",
    "requester",
    "approvers",
    "decided_by",
    "decision",
    "reason",
    "arguments_hash",
    "approved_hash",
    "proposed_at",
    "decided_at",
    "started_at",
    "finished_at",
    "seconds_to_decision",
    "seconds_executing",
    "attempts",
    "result",
    "link",
    "error",
]


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    return round((end - start).total_seconds(), 3) if start and end else None


# Rows after which every earlier vote is void: an edit (other arguments), a reroute (other
# deciders).
VOIDING = frozenset({"edit", "reroute"})


def _decision(proposal: Proposal, events: list[AuditEntry]) -> dict[str, Any]:
    """The state, decider, approvers and decision time the chained rows record: the rows of
    the proposal's own workspace chain, in chain order."""
    chained = sorted(
        (e for e in events if e.team_id == proposal.team_id and e.seq is not None),
        key=lambda e: e.seq or 0,
    )
    decided_by: str | None = None
    decided_at: datetime | None = None
    approvers: list[str] = []
    for event in chained:
        if event.event in VOIDING:
            approvers = []
        elif event.event == "vote":
            approvers.append(event.actor)
        elif event.from_state == "proposed" and event.to_state != "proposed":
            if event.event != "expire":  # the clock decides nothing
                decided_by, decided_at = event.actor, event.created_at
            if event.to_state == "approved":
                approvers.append(event.actor)
    return {
        "decision": chained[-1].to_state if chained else None,
        "decided_by": decided_by,
        "decided_at": decided_at,
        "approvers": " ".join(dict.fromkeys(approvers)),
    }


async def audit_rows(db: Database, batch: int = 500) -> AsyncIterator[dict[str, Any]]:
    last_id = 0
    while True:
        async with db.reading() as session:
            proposals = (
                await session.scalars(
                    select(Proposal).where(Proposal.id > last_id).order_by(Proposal.id).limit(batch)
                )
            ).all()
            if not proposals:
                return
            ids = [p.id for p in proposals]
            events = (
                await session.scalars(
                    select(AuditEntry)
                    .where(AuditEntry.proposal_id.in_(ids))
                    .order_by(AuditEntry.id)
                )
            ).all()
        for proposal in proposals:
            own = [e for e in events if e.proposal_id == proposal.id]
            decided = _decision(proposal, own)
            started = next((e.created_at for e in own if e.to_state == "executing"), None)
            finished = next(
                (
                    e.created_at
                    for e in reversed(own)
                    if e.to_state in ("succeeded", "failed", "unknown") and e.event != "interrupt"
                ),
                None,
            )
            yield {
                "proposal_id": proposal.id,
                "tool": proposal.tool_name,
                "description": proposal.description,
                "requester": proposal.requester,
                "approvers": decided["approvers"],
                "decided_by": decided["decided_by"],
                "decision": decided["decision"],
                "reason": proposal.decline_reason,
                "arguments_hash": proposal.arguments_hash,
                "approved_hash": proposal.approved_hash,
                "proposed_at": _iso(proposal.created_at),
                "decided_at": _iso(decided["decided_at"]),
                "started_at": _iso(started),
                "finished_at": _iso(finished),
                "seconds_to_decision": _seconds(proposal.created_at, decided["decided_at"]),
                "seconds_executing": _seconds(started, finished),
                "attempts": proposal.attempts,
                "result": proposal.result_summary,
                "link": proposal.result_link,
                "error": proposal.error,
                "events": [
                    {
                        "at": _iso(e.created_at),
                        "event": e.event,
                        "actor": e.actor,
                        "from": e.from_state,
                        "to": e.to_state,
                        "detail": e.detail,
                        "seq": e.seq,
                        "hash": e.row_hash,
                    }
                    for e in own
                ],
            }
        last_id = proposals[-1].id


async def export(db: Database, out: TextIO, fmt: str, records: str = "actions") -> int:
    """Write the actions' audit trail, or (`records="feedback"`) the feedback people gave on
    answers; returns how many rows were written."""

    columns, rows = (
        (FEEDBACK_COLUMNS, feedback_rows(db))
        if records == "feedback"
        else (COLUMNS, audit_rows(db))
    )
    count = 0
    writer = csv.DictWriter(out, columns, extrasaction="ignore") if fmt == "csv" else None
    if writer is not None:
        writer.writeheader()
    async for row in rows:
        if writer is not None:
            writer.writerow(row)
        else:
            out.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
        count += 1
    return count
