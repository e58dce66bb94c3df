"""Who may approve what. Configured per tool or per pack in `APPROVAL_POLICIES` (JSON):

    {"create_task": {"approvers": ["U01", "S02"], "approvals_required": 2},
     "slack": {"approvers": ["S0OPS"], "four_eyes": true},
     "*": {"expires_after_minutes": 30}}

A tool's own entry wins over its pack's, which wins over "*". Without `approvers`, the person
whose message led to the proposal approves. `four_eyes` forbids approving one's own proposal.
User group ids (S…) are resolved to members through the Web API.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from slack_sdk.web.async_client import AsyncWebClient


class PolicyConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    approvers: list[str] = Field(default_factory=list)
    four_eyes: bool = False
    approvals_required: int = Field(1, ge=1, le=10)
    expires_after_minutes: float | None = Field(None, gt=0, le=7 * 24 * 60)


@dataclass(frozen=True)
class Policy:
    approvers: tuple[str, ...]  # user ids and user group ids; empty: the requester
    four_eyes: bool
    approvals_required: int
    expires_after_minutes: float | None


class Policies:
    def __init__(self, config: dict[str, PolicyConfig] | None = None) -> None:
        self._config = config or {}
        # Set when a policy file is in force: whether any of its ask rules names approvers.
        self.rules_name_approvers: Callable[[], bool] = lambda: False

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> Policies:
        return cls({key: PolicyConfig.model_validate(value) for key, value in raw.items()})

    @property
    def anyone_else_approves(self) -> bool:
        """False when every proposal is decided by its requester (the default)."""
        return any(c.approvers for c in self._config.values()) or self.rules_name_approvers()

    def for_proposal(self, tool: str, pack: str, recorded: dict[str, Any] | None) -> Policy:
        """Who decides a proposal: what the policy's ask rule said when it was made (kept on
        the proposal), else the settings' lookup (proposals made before policy files)."""
        if not recorded or recorded.get("outcome") != "ask":
            return self.for_tool(tool, pack)
        approvers = [*(recorded.get("approvers") or ()), *(recorded.get("escalated_to") or ())]
        return Policy(
            tuple(dict.fromkeys(str(a) for a in approvers)),
            bool(recorded.get("four_eyes", False)),
            int(recorded.get("approvals_required") or 1),
            None,  # its expiry was fixed when it was proposed
        )

    def for_tool(self, tool: str, pack: str) -> Policy:
        merged: dict[str, Any] = {}
        for key in ("*", pack, tool):
            if key in self._config:
                merged.update(self._config[key].model_dump(exclude_unset=True))
        config = PolicyConfig.model_validate(merged)
        return Policy(
            tuple(config.approvers),
            config.four_eyes,
            config.approvals_required,
            config.expires_after_minutes,
        )


class GroupMembers:
    """Members of user groups (`usergroups.users.list`), cached for a few minutes."""

    TTL_SECONDS = 300.0

    def __init__(self, slack: AsyncWebClient) -> None:
        self.slack = slack
        self._cache: dict[str, tuple[float, frozenset[str]]] = {}

    async def members(self, group_id: str, max_age: float | None = None) -> frozenset[str]:
        """`max_age`: how old (seconds) a cached answer may be; 0 asks Slack now."""
        cached = self._cache.get(group_id)
        limit = self.TTL_SECONDS if max_age is None else max_age
        if cached and time.monotonic() - cached[0] < limit:
            return cached[1]
        response = await self.slack.usergroups_users_list(usergroup=group_id)
        users = frozenset(str(u) for u in response.get("users") or [])
        self._cache[group_id] = (time.monotonic(), users)
        return users

    def fresh(self) -> GroupMembers:
        """The same groups read from Slack at every question (refreshing this cache): a
        click is authorised by who is in the group when it is clicked, not minutes before."""
        return _FreshGroups(self)


class _FreshGroups(GroupMembers):
    def __init__(self, cached: GroupMembers) -> None:
        self._cached = cached
        self.slack = cached.slack

    async def members(self, group_id: str, max_age: float | None = None) -> frozenset[str]:
        return await self._cached.members(group_id, max_age=0.0)


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    reason: str = ""


async def may_approve(
    policy: Policy,
    requester: str,
    user: str,
    groups: GroupMembers,
    revised_by: str | None = None,
) -> Verdict:
    """May `user` decide on a proposal of `requester` (last edited by `revised_by`)?"""
    if policy.four_eyes and user == requester:
        return Verdict(False, "this action needs someone other than the requester to approve it")
    if policy.four_eyes and user == revised_by:
        return Verdict(False, "you edited this action, so someone else must approve it")
    if not policy.approvers:
        if policy.four_eyes:
            return Verdict(False, "no approvers are configured for this action")
        if user == requester:
            return Verdict(True)
        return Verdict(False, f"only <@{requester}>, who asked for it, may decide")
    if await is_approver(policy, user, groups):
        return Verdict(True)
    return Verdict(False, "you are not one of the approvers of this action")


async def is_approver(policy: Policy, user: str, groups: GroupMembers) -> bool:
    """Whether `user` is one of the policy's approvers, by id or through a user group."""
    if user in policy.approvers:
        return True
    for entry in policy.approvers:
        if entry.startswith("S") and user in await groups.members(entry):
            return True
    return False
