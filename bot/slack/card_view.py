"""What an approval card shows of a proposal (`CardView`), from the proposal, its tool and the
policy it is decided under: a plain function, so the publisher, its refreshes and its escalation
notices build the same view."""

from __future__ import annotations

from typing import Any

from bot.approvals import grants
from bot.approvals.machine import State
from bot.approvals.policy import Policy
from bot.db.models import Proposal
from bot.provenance import sources_of
from bot.slack.card_people import kinds_of
from bot.slack.cards import CardView
from bot.tools.registry import Tool
from bot.tools.shown_notes import mentions_of


def card_view(
    proposal: Proposal,
    approvers: list[str],
    people: dict[str, str],
    tool: Tool[Any] | None,
    policy: Policy,
) -> CardView:
    return CardView(
        proposal_id=proposal.id,
        revision=proposal.revision,
        state=State(proposal.state.value),
        description=proposal.description,
        changes=list(proposal.preview),
        requester=proposal.requester,
        expires_at=proposal.expires_at,
        approvers=approvers,
        approvals_required=policy.approvals_required,
        destructive=bool(tool and tool.destructive),
        decided_by=proposal.decided_by,
        decided_at=proposal.decided_at,
        decline_reason=proposal.decline_reason,
        result_summary=proposal.result_summary,
        result_link=proposal.result_link,
        error=proposal.error,
        provenance=sources_of(proposal.provenance),
        arguments=dict(proposal.arguments),
        arguments_hash=proposal.arguments_hash,
        mentions=mentions_of(tool).value,
        kinds=kinds_of(tool),
        people=people,
        finds_earlier_write=bool(tool and tool.finds_earlier_write),
        editable=tool is None or (tool.preview is not None and not tool.internal),
        grants=grants.offered(
            proposal.policy,
            grants.self_approves(policy.approvers, policy.four_eyes, proposal.requester),
        )
        if policy.approvals_required == 1
        else (),
    )
