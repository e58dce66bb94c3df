"""A new policy version meets what the old one left behind: grants whose rule changed (or is
gone) are voided with why, and every waiting proposal is decided again by the one door: a
deny closes it (the model is told why), other deciders reroute its card (votes void, the new
approvers are told). Every replica runs it after it loads a version; each change is a
compare-and-set, so running it twice changes nothing twice."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from sqlalchemy import select

from bot.approvals import grants
from bot.approvals.errors import AlreadyHandled
from bot.approvals.questions import question_of
from bot.approvals.ruling import Step
from bot.approvals.service import ApprovalsService
from bot.db.models import Proposal
from bot.policy.deciders import rule_hash
from bot.policy.one_door import OneDoor
from bot.states import State

log = logging.getLogger(__name__)

Announce = Callable[[Proposal], Awaitable[None]]


async def reconsider(
    door: OneDoor,
    approvals: ApprovalsService,
    rerouted: Announce,
    closed: Announce,
) -> tuple[int, int, int]:
    """(grants voided, proposals rerouted, proposals closed)."""
    in_force = door.source.current
    hashes = {r.name: rule_hash(r) for r in in_force.policy.rules if r.outcome == "ask"}
    async with approvals.db.transaction() as session:
        voided = await grants.void_changed(session, hashes, in_force.version)
        for grant in voided:
            log.info("grant %s voided: %s", grant.id, grant.void_reason)
    async with approvals.db.reading() as session:
        waiting = list(
            (
                await session.scalars(
                    select(Proposal).where(Proposal.state == State.PROPOSED).order_by(Proposal.id)
                )
            ).all()
        )
    moved = shut = 0
    for proposal in waiting:
        question = question_of(proposal, approvals.pack_of(proposal.tool_name))
        ruling = await door(question, Step.RELOAD)
        if ruling.closes():
            try:
                done = await approvals.close_by_policy(proposal.id, proposal.version, ruling)
            except AlreadyHandled:
                continue
            await approvals.record(question, ruling, Step.RELOAD, None)
            shut += 1
            await closed(done)
        elif ruling.reroutes(proposal.policy):
            fresh = await approvals.reroute(proposal.id, proposal.version, ruling)
            if fresh is not None:
                await approvals.record(question, ruling, Step.RELOAD, None)
                moved += 1
                await rerouted(fresh)
    if voided or moved or shut:
        log.info(
            "policy version %s: %d grant(s) voided, %d card(s) rerouted, %d closed",
            in_force.version, len(voided), moved, shut,
        )  # fmt: skip
    return len(voided), moved, shut
