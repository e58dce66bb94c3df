"""Where a write call meets the grants: after the policy asked (a deny never gets here, an
allow needs none), a live grant for this requester, tool definition and scope approves it."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from bot.approvals import grants
from bot.db.models import Conversation, Grant
from bot.durations import parse_duration
from bot.policy.engine import Decision
from bot.tools.registry import Preview, Tool


async def grant_for(
    session: AsyncSession,
    decision: Decision | None,
    tool: Tool[Any],
    preview: Preview,
    conversation: Conversation,
    requester: str,
) -> tuple[dict[str, Any] | None, Grant | None]:
    """The proposal's policy record (with the tool's definition hash when the rule offers
    grants) and the grant that covers the call, if any; read from the database each time."""
    if decision is None:
        return None, None
    kept = decision.record()
    ask = decision.ask
    if decision.outcome != "ask" or ask is None or not ask.grants:
        return kept, None
    kept["definition"] = grants.definition_of(tool, preview.pin)
    if ask.grant_expiry:
        kept["grant_expiry_seconds"] = parse_duration(ask.grant_expiry).total_seconds()
    scopes = tuple(s for s in ask.grants if s in grants.SCOPES)
    if not scopes:
        return kept, None
    found = await grants.covering(
        session,
        team_id=conversation.team_id,
        requester=requester,
        tool_name=tool.name,
        definition=kept["definition"],
        channel_id=conversation.channel_id,
        thread_ts=conversation.thread_ts or None,
        scopes=scopes,
    )
    return kept, found
