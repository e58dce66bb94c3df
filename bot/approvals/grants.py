"""Grants from the card: what a click on "Approve for this thread", "Approve for this
channel" or "Always for me" leaves behind, and the look-up a later call meets.

A grant is bound to the requester it covers, the tool (by name and definition hash), the
person who granted it, its scope, and the rule (with its content), requirements and audience
it was made under. It is read from the database at every proposal (no cache), so a revoke on
one replica holds for the next proposal on every other. A changed definition (another schema,
pack or MCP server description) matches no grant; whether a matching grant covers a call is
the one door's to decide (`bot.policy.one_door`)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import timedelta
from functools import lru_cache
from typing import Any

from pydantic import BaseModel
from sqlalchemy import bindparam, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.db.models import Grant, Proposal, utcnow
from bot.tools.registry import Tool

SCOPES = ("thread", "channel", "me")  # "once" is a plain approval: it leaves nothing


def definition_of(tool: Tool[Any], pin: str | None) -> str:
    """The tool's definition hash: its name, pack, words and argument schema, and an MCP
    server's own description of it (the preview's `mcp-sha256:` pin)."""
    schema = tool.input_schema if tool.input_schema is not None else _schema(tool)
    shown = {
        "name": tool.name,
        "pack": tool.pack,
        "description": tool.description,
        "schema": schema,
        "server": pin if pin and pin.startswith("mcp-sha256:") else None,
    }
    canonical = json.dumps(shown, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def _schema(tool: Tool[Any]) -> dict[str, Any]:
    arguments: type[BaseModel] = tool.arguments
    return _schema_of(arguments)


@lru_cache(maxsize=1024)
def _schema_of(arguments: type[BaseModel]) -> dict[str, Any]:
    """A model class's JSON schema, made once (pydantic builds it anew at every call, about
    a millisecond that every proposal offering grants paid); read only, never changed."""
    schema: dict[str, Any] = arguments.model_json_schema()
    return schema


def self_approves(approvers: Sequence[str], four_eyes: bool, requester: str) -> bool:
    """Whether the requester may approve their own proposals: no four-eyes, and no approvers
    (the requester decides) or the requester named among them by id."""
    return not four_eyes and (not approvers or requester in approvers)


def offered(policy: dict[str, Any] | None, self_approving: bool) -> tuple[str, ...]:
    """The scopes a card offers beyond "once": the ask rule's `grants`, in a fixed order;
    "me" only where the requester may approve their own proposals (`self_approves`)."""
    named = set((policy or {}).get("grants") or ())
    if not (policy or {}).get("definition"):
        return ()
    return tuple(s for s in SCOPES if s in named and (s != "me" or self_approving))


def make(
    session: AsyncSession, proposal: Proposal, scope: str, granted_by: str, turn: str | None
) -> Grant:
    """A grant from `proposal`'s approval by `granted_by`, in the caller's transaction, bound
    to the rule (and its content), requirements and audience the proposal was decided under.
    In a DM's timeline (no thread) a thread grant covers that conversation turn only."""
    policy = proposal.policy or {}
    expiry = policy.get("grant_expiry_seconds")
    thread = (proposal.thread_ts or turn or "") if scope == "thread" else None
    grant = Grant(
        team_id=proposal.team_id,
        tool_name=proposal.tool_name,
        definition=str(policy["definition"]),
        requester=proposal.requester,
        scope=scope,
        channel_id=proposal.channel_id if scope in ("thread", "channel") else None,
        thread_ts=thread,
        granted_by=granted_by,
        rule=policy.get("rule"),
        rule_hash=policy.get("rule_hash"),
        policy_version=policy.get("version"),
        approvers=list(policy.get("approvers") or ()),
        approvals_required=int(policy.get("approvals_required") or 1),
        four_eyes=bool(policy.get("four_eyes")),
        audience=proposal.audience,
        proposal_id=proposal.id,
        expires_at=utcnow() + timedelta(seconds=float(expiry)) if expiry else None,
    )
    session.add(grant)
    return grant


def _alive(now: Any) -> Any:
    return (
        Grant.revoked_at.is_(None)
        & Grant.voided_at.is_(None)
        & or_(Grant.expires_at.is_(None), Grant.expires_at > now)
    )


# Built once: constructing this statement anew cost more than running it (bench/policy.py:
# ~1.5 ms of the look-up's ~3 ms through the ORM, against ~0.15 ms of SQLite's own work).
_CANDIDATES = (
    select(Grant)
    .where(
        Grant.team_id == bindparam("team_id"),
        Grant.requester == bindparam("requester"),
        Grant.tool_name == bindparam("tool_name"),
        Grant.definition == bindparam("definition"),
        Grant.revoked_at.is_(None),
        Grant.voided_at.is_(None),
        Grant.scope.in_(bindparam("scopes", expanding=True)),
        or_(Grant.expires_at.is_(None), Grant.expires_at > bindparam("now")),
        or_(
            Grant.scope == "me",
            (Grant.scope == "channel") & (Grant.channel_id == bindparam("channel_id")),
            (Grant.scope == "thread")
            & (Grant.channel_id == bindparam("channel_id"))
            & (Grant.thread_ts == bindparam("thread_ts")),
        ),
    )
    .order_by(Grant.id)
    .limit(20)
)


async def candidates(
    session: AsyncSession,
    *,
    team_id: str,
    requester: str,
    tool_name: str,
    definition: str,
    channel_id: str,
    thread_ts: str | None,
    scopes: tuple[str, ...] = SCOPES,
) -> list[Grant]:
    """Live grants of one of `scopes` whose place, requester and tool definition match this
    call, oldest first. Whether one covers it is the one door's to say
    (`bot.policy.one_door`): same rule, unchanged, its granter still entitled."""
    found = await session.scalars(
        _CANDIDATES,
        {
            "team_id": team_id,
            "requester": requester,
            "tool_name": tool_name,
            "definition": definition,
            "scopes": list(scopes),
            "now": utcnow(),
            "channel_id": channel_id,
            "thread_ts": thread_ts or "",
        },
    )
    return list(found.all())


async def void_changed(
    session: AsyncSession, rule_hashes: dict[str, str | None], version: str
) -> list[Grant]:
    """Void every live grant whose rule is gone or changed in policy `version` (`rule_hashes`:
    each ask rule's name -> its content hash). Returns the grants voided."""
    now = utcnow()
    live_grants = (await session.scalars(select(Grant).where(_alive(now)))).all()
    voided = []
    for grant in live_grants:
        if grant.rule in rule_hashes and rule_hashes[grant.rule] == grant.rule_hash:
            continue
        why = (
            f"the rule {grant.rule!r} changed in policy version {version}"
            if grant.rule in rule_hashes
            else f"the rule {grant.rule!r} is no longer in policy version {version}"
        )
        grant.voided_at, grant.void_reason = now, why
        voided.append(grant)
    return voided


async def live(session: AsyncSession, team_id: str, user: str | None = None) -> list[Grant]:
    """Grants not revoked nor expired (voided ones too, shown as voided with why); with
    `user`: those they made or that cover them."""
    now = utcnow()
    query = select(Grant).where(
        Grant.team_id == team_id,
        Grant.revoked_at.is_(None),
        or_(Grant.expires_at.is_(None), Grant.expires_at > now),
    )
    if user is not None:
        query = query.where(or_(Grant.granted_by == user, Grant.requester == user))
    return list((await session.scalars(query.order_by(Grant.id).limit(50))).all())


async def revoke(session: AsyncSession, grant_id: int, team_id: str, user: str) -> Grant | None:
    """Revoke a live grant made by or covering `user`; None when there is no such grant."""
    return await session.scalar(
        update(Grant)
        .where(
            Grant.id == grant_id,
            Grant.team_id == team_id,
            Grant.revoked_at.is_(None),
            or_(Grant.granted_by == user, Grant.requester == user),
        )
        .values(revoked_at=utcnow(), revoked_by=user)
        .returning(Grant)
    )


SCOPE_WORDS = {
    "thread": "for this thread",
    "channel": "for this channel",
    "me": "for all their calls",
}


def described(grant: Grant) -> str:
    """`create_task for <@U1>, always, granted by <@U2>` in Slack's words."""
    where = SCOPE_WORDS.get(grant.scope, grant.scope)
    if grant.scope == "thread":
        where = f"in a thread of <#{grant.channel_id}>"
    elif grant.scope == "channel":
        where = f"in <#{grant.channel_id}>"
    until = f", until {grant.expires_at:%Y-%m-%d %H:%M} UTC" if grant.expires_at else ""
    told = f"`{grant.tool_name}` for <@{grant.requester}> {where}, by <@{grant.granted_by}>{until}"
    if grant.voided_at is not None:
        return f"{told}: *voided*, {grant.void_reason or 'its rule changed'}"
    return told
