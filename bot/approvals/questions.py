"""The question the one door answers, made from a proposal (`question_of`), and the record of
each answer (`record_ruling`): its inputs and outcome, with the step and the revision it
decided, which `policy replay` replays."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from bot.approvals.ruling import Question, Ruling, Step
from bot.db.models import Message, PolicyDecision, Proposal, Role
from bot.metrics import POLICY_DECISIONS
from bot.provenance import sources_of


def question_of(
    proposal: Proposal,
    pack: str,
    arguments: dict[str, Any] | None = None,
    turn: str | None = None,
) -> Question:
    """The proposal's current revision (or `arguments`, an Edit's new revision)."""
    kept = proposal.policy or {}
    counts = kept.get("counts") or (0, 0)
    return Question(
        team_id=proposal.team_id,
        tool=proposal.tool_name,
        pack=pack,
        arguments=dict(proposal.arguments if arguments is None else arguments),
        channel=proposal.channel_id,
        thread_ts=proposal.thread_ts,
        requester=proposal.requester,
        audience=proposal.audience,
        revision=proposal.revision + (0 if arguments is None else 1),
        revised_by=proposal.revised_by,
        proposal_id=proposal.id,
        definition=kept.get("definition"),
        turn=turn,
        counts=(int(counts[0]), int(counts[1])),
        created_at=proposal.created_at,
        recorded=kept,
        sources=sources_of(proposal.provenance),
    )


async def turn_key(
    session: AsyncSession, conversation_id: int | None, before_message: int | None = None
) -> str | None:
    """A conversation turn's key: its person's message (the newest, or the newest before
    `before_message`). A DM's timeline has no thread, so a thread grant there ends with it."""
    if conversation_id is None:
        return None
    query = select(func.max(Message.id)).where(
        Message.conversation_id == conversation_id, Message.role == Role.USER
    )
    if before_message is not None:
        query = query.where(Message.id < before_message)
    found = await session.scalar(query)
    return None if found is None else f"turn:{found}"


def record_ruling(
    session: AsyncSession,
    question: Question,
    ruling: Ruling,
    step: Step,
    actor: str | None = None,
    proposal_id: int | None = None,
) -> None:
    """One row per decision: what was decided, on which revision, at which step, for whom."""
    POLICY_DECISIONS.labels(outcome=ruling.outcome).inc()
    shadow = ruling.record.get("shadow")
    if shadow:
        POLICY_DECISIONS.labels(outcome="shadow").inc()
    counts = question.counts
    session.add(
        PolicyDecision(
            team_id=question.team_id,
            channel_id=question.channel,
            thread_ts=question.thread_ts,
            requester=question.requester,
            tool_name=question.tool,
            pack=question.pack,
            arguments=question.arguments,
            groups=[*(ruling.record.get("groups") or ()), *context_of(question, ruling)],
            calls_in_thread=counts[0],
            calls_today=counts[1],
            outcome=ruling.outcome,
            rule=ruling.rule,
            policy_version=ruling.version,
            reason=ruling.refusal or ruling.reason,
            shadow=list(shadow) if shadow else None,
            proposal_id=proposal_id if proposal_id is not None else question.proposal_id,
            step=step.value,
            revision=question.revision,
            actor=actor[:64] if actor else None,
        )
    )


def context_of(question: Question, ruling: Ruling) -> list[dict[str, Any]]:
    """What the decision knew beyond the requester's groups, kept after them in the row's
    `groups` (one mapping, only when there is any): the untrusted sources the call followed
    and whether the tool was a read or open-world, so `policy replay` decides it the same."""
    context: dict[str, Any] = {}
    untrusted = [s.fact() for s in question.sources if s.untrusted]
    if untrusted:
        context["sources"] = untrusted
    for key in ("read", "open_world"):
        if ruling.record.get(key):
            context[key] = True
    return [context] if context else []


def recorded_context(groups: list[Any] | None) -> tuple[tuple[str, ...], dict[str, Any]]:
    """A row's `groups` split into the requester's groups and the context (`context_of`)."""
    names = tuple(g for g in groups or () if isinstance(g, str))
    found = next((g for g in groups or () if isinstance(g, dict)), {})
    return names, found
