"""Grants in Slack: `/approvals grants` and the App Home list the live grants a person made or
that cover them, each with a Revoke button. A revoke is a database write, read again at every
proposal, so it holds for the next proposal on every replica."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncRespond

from bot.approvals import grants
from bot.db.audit_chain import append, lock_head
from bot.db.models import Grant, Proposal
from bot.db.session import Database
from bot.slack.card_text import clip, safe
from bot.slack.payloads import BadPayload, button_value, clicker, whole_number
from bot.slack.record_lines import when
from bot.tools.field_kinds import label_of

log = logging.getLogger(__name__)

REVOKE = "grant_revoke"
SHOWN = 10  # grants listed at most (a section and its button each)


def grant_words(grant: Grant) -> str:
    """A grant as a person reads it: the action's label, who it covers and where, who granted
    it, until when (in the viewer's time zone); never its number or the tool's name."""
    where = grants.SCOPE_WORDS.get(grant.scope, "")
    if grant.scope == "thread":
        where = f"in a thread of <#{grant.channel_id}>"
    elif grant.scope == "channel":
        where = f"in <#{grant.channel_id}>"
    told = (
        f"*{safe(label_of(grant.tool_name), 80)}* for <@{grant.requester}> {where}, "
        f"granted by <@{grant.granted_by}>"
    )
    if grant.expires_at:
        told += f", until {when(grant.expires_at)}"
    if grant.voided_at is not None:
        told += f": *voided*, {safe(grant.void_reason or 'its rule changed', 200)}"
    return told


def grant_blocks(rows: list[Grant]) -> list[dict[str, Any]]:
    """A heading and one section with a Revoke button per grant (at most `SHOWN`)."""
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": "Grants"}}
    ]
    if not rows:
        text = "No live grants made by you or covering you."
        return [*blocks, {"type": "section", "text": {"type": "mrkdwn", "text": text}}]
    for grant in rows[:SHOWN]:
        section: dict[str, Any] = {
            "type": "section",
            "text": {"type": "mrkdwn", "text": clip(grant_words(grant), 2900)},
        }
        if grant.voided_at is None:  # a voided grant covers nothing: nothing to revoke
            section["accessory"] = {
                "type": "button",
                "text": {"type": "plain_text", "text": "Revoke"},
                "action_id": REVOKE,
                "value": str(grant.id),
                "style": "danger",
            }
        blocks.append(section)
    return blocks


async def live_for(db: Database, team: str, user: str) -> list[Grant]:
    async with db.transaction() as session:
        return await grants.live(session, team, user)


async def revoke(db: Database, team: str, grant_id: int, user: str) -> Grant | None:
    """Revoke the grant if `user` made it or is covered by it, with an audit row on the
    proposal it came from (no proposal is locked)."""
    async with db.transaction() as session:
        await lock_head(session, team)  # the chain's lock first, as every audit writer takes it
        revoked = await grants.revoke(session, grant_id, team, user)
        if revoked is None:
            return None
        proposal = await session.get(Proposal, revoked.proposal_id) if revoked.proposal_id else None
        if proposal is not None:
            state = proposal.state.value
            await append(
                session,
                team_id=team,
                proposal_id=proposal.id,
                from_state=state,
                to_state=state,
                event="grant_revoke",
                actor=user,
                detail={"grant": revoked.id, "scope": revoked.scope},
            )
        return revoked


def revoke_button(db: Database, on_home: Callable[[str, str], None]) -> Handler:
    """The Revoke button, in an ephemeral answer (answered there) or in the App Home
    (`on_home(team, user)` publishes it again)."""

    async def pressed(ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond) -> None:
        await ack()
        team = str((body.get("team") or {}).get("id") or body["user"].get("team_id") or "")
        try:
            user, grant_id = clicker(body), whole_number(button_value(body))
        except BadPayload as exc:
            log.info("refused a crafted grant button: %s", exc)
            return
        done = await revoke(db, team, grant_id, user)
        note = (
            "Revoked the grant: it covers nothing from the next proposal on."
            if done
            else "Nothing changed: that grant is gone or not yours to revoke."
        )
        if body.get("response_url"):
            blocks = grant_blocks(await live_for(db, team, user))
            head = {"type": "section", "text": {"type": "mrkdwn", "text": note}}
            await respond(replace_original=True, text=note, blocks=[head, *blocks])
        else:
            on_home(team, user)

    return pressed


Handler = Callable[[AsyncAck, dict[str, Any], AsyncRespond], Awaitable[None]]
