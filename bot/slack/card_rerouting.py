"""A proposal the one door rerouted (the policy in force names other deciders): the card is
brought in line and the new deciders are told where it waits, as when it was first posted:
routed by DM, each new approver gets a copy; otherwise the thread is told who decides now.
Best effort: the reroute itself is already recorded, and every click is judged by the door."""

from __future__ import annotations

import logging

from bot.db.models import Proposal
from bot.slack.card_publisher import CardPublisher
from bot.slack.card_routing import SLACK_FAILURES
from bot.slack.cards import approval_card

log = logging.getLogger(__name__)

CHANGED = ":arrows_counterclockwise: The approval policy changed: "


async def announce_reroute(cards: CardPublisher, proposal: Proposal) -> None:
    cards.refresh(proposal.id)
    try:
        approvers = cards.policy_of(proposal).approvers
        people = await cards.people(approvers, proposal) if approvers else [proposal.requester]
        route = await cards.route(proposal)
        if route is not None and route.channel is None and route.recipients:
            text, blocks = approval_card(await cards.view(proposal))
            sent = await cards.post_copies(
                proposal, list(route.recipients), text, blocks, "reroute"
            )
            missed, where = sent.missed, " (notified by direct message)"
        else:
            missed, where = {}, ""
        shown = ", ".join(f"<@{p}>" for p in people[:10]) or "nobody who may read it"
        await cards.note_in_thread(proposal, f"{CHANGED}this action now waits for {shown}{where}.")
        await cards.tell_missed(proposal, missed)
    except SLACK_FAILURES as exc:
        log.warning("reroute notice for %s failed: %s", proposal.id, type(exc).__name__)
