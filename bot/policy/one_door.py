"""The one door: "may this exact revision of a write run now, and who may decide it", answered
one way for every step that can lead to a write (the proposal, an Edit, each click, a grant's
cover, each escalation step, a Retry, a reload and the start of execution).

The answer is made from the policy version in force (never the one recorded when the card
was made), the requester's user groups and the deciders' groups and reach read afresh from
Slack (except at the proposal, which execution decides again), and the data's audience:

- deny (with the rule's reason): nothing runs, nobody may approve it;
- allow (which rule): it runs without a card;
- grant (which): a live grant made on a card of the same rule, unchanged since, covers it,
  and its granter may still approve it and read what it carries;
- ask: the rule's approvers, quorum, four-eyes, ladder and route; a fail-closed ask (a
  condition could not be evaluated) is covered by nothing and never decided by the requester.

With an actor (a click), the answer also says whether that person may decide; with votes (at
execution), which of them still count. No other code decides either."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError

from bot.approvals import grants
from bot.approvals.policy import GroupMembers
from bot.approvals.ruling import Question, Ruling, Step
from bot.db.models import Grant
from bot.db.session import Database
from bot.membership import Reach
from bot.policy.deciders import (
    escalated_to,
    is_approver,
    ladder_allows,
    record_of,
    recorded_deciders,
    with_,
)
from bot.policy.engine import Decision, Facts, names_tool
from bot.policy.gate import decide_off_loop, referenced_groups
from bot.policy.model import PolicyFile
from bot.policy.source import PolicySource
from bot.policy.untrusted import grants_stand, with_context

log = logging.getLogger(__name__)

SLACK_FAILURES = (SlackApiError, aiohttp.ClientError, TimeoutError, OSError)
UNCHECKED = "Slack could not tell whether you are one of the approvers right now; try again"
UNREADABLE = (
    "this action carries what you may not read in Slack, so only people who can may decide on it"
)
GROUPS_UNREAD = (
    "Slack could not tell which user groups the requester is in, so the policy cannot tell "
    "which rule applies; try again in a moment"
)


def tool_nature(tool: Any) -> tuple[bool, bool]:
    """A registry tool's nature for the door: (a read, open-world); an unknown tool (None) is
    decided as a write."""
    if tool is None:
        return False, False
    return not tool.requires_approval, bool(tool.open_world)


class OneDoor:
    def __init__(
        self,
        source: PolicySource,
        groups: GroupMembers,
        reach: Reach,
        db: Database,
        defaults: Callable[[str, dict[str, Any]], dict[str, Any]] = lambda _tool, args: args,
        nature: Callable[[str], tuple[bool, bool]] = lambda _tool: (False, False),
    ) -> None:
        """`defaults`: a call's arguments with its tool's defaults applied (the registry's
        `with_defaults`): conditions read them, so a field left out reads as its default.
        `nature`: whether a tool is a read and whether it is open-world (`tool_nature`), as
        the tools in force say at each step."""
        self.source = source
        self.groups = groups
        self.reach = reach
        self.db = db
        self.defaults = defaults
        self.nature = nature
        self._referenced: tuple[PolicyFile, dict[tuple[str, str], list[str]]] | None = None

    def version_in_force(self) -> str:
        return self.source.current.version

    async def __call__(
        self,
        question: Question,
        step: Step,
        *,
        actor: str | None = None,
        votes: Sequence[str] = (),
    ) -> Ruling:
        in_force = self.source.current
        # A proposal is decided again at execution; a list shows, it decides nothing: both
        # may read Slack's answers from the caches. Every other step reads them now.
        fresh = step not in (Step.PROPOSE, Step.LIST)
        groups = self.groups.fresh() if fresh else self.groups
        decision, member_of, transient = await self._decide(
            in_force.policy, in_force.version, question, None if not fresh else 30.0
        )
        record = {**record_of(decision, question), "groups": list(member_of)}
        read_only, open_world = self.nature(question.tool)
        if read_only:
            record["read"] = True  # replayed as a read (`policy replay`)
        if open_world:
            record["open_world"] = True
        if decision.outcome == "deny":
            ruling = Ruling(
                "deny", decision.version, decision.rule, decision.reason, record,
                transient=transient,
            )  # fmt: skip
        elif decision.outcome == "allow":
            ruling = Ruling("allow", decision.version, decision.rule, None, record)
        else:
            ruling = Ruling(
                "ask", decision.version, decision.rule, decision.reason, record,
                failed_closed=decision.failed_closed,
            )  # fmt: skip
            if step is Step.PROPOSE and grants_stand(ruling.record):
                found = await self._covering_grant(question, ruling, groups)
                if found is not None:
                    ruling = with_(ruling, outcome="grant", grant_id=found)
        # Who may click the waiting card: under an ask, the deciders the policy in force
        # names; under an allow, the people the card was made for; under a deny, nobody may
        # approve, but they may still decline or ask for changes.
        deciders = ruling
        if ruling.outcome == "allow" or (ruling.outcome == "deny" and step is Step.DECIDE):
            deciders = recorded_deciders(ruling, question)
        refusal = None
        if actor is not None:
            refusal = await self.refusal(actor, question, deciders, groups, fresh)
        valid = tuple([v for v in votes if await self._counts(v, question, ruling, groups)])
        return with_(ruling, refusal=refusal, valid_votes=valid)

    # -- the policy's decision -------------------------------------------------------------
    def _groups_for(self, policy: PolicyFile, tool: str, pack: str) -> list[str]:
        """The user groups the rules naming this tool ask about (found once per policy)."""
        if self._referenced is None or self._referenced[0] is not policy:
            self._referenced = (policy, {})
        found = self._referenced[1].get((tool, pack))
        if found is None:
            naming = [r for r in policy.rules if names_tool(r, tool, pack)]
            found = sorted(referenced_groups(policy.model_copy(update={"rules": naming})))
            self._referenced[1][(tool, pack)] = found
        return found

    async def _decide(
        self, policy: PolicyFile, version: str, q: Question, max_age: float | None
    ) -> tuple[Decision, tuple[str, ...], bool]:
        """The policy's decision, the requester's groups it was made on, and whether it is a
        transient refusal: a group a rule naming the tool asks about could not be read, so
        nobody can tell which rule applies (a more lenient one must not be guessed); it is
        asked again at the next step. Groups are read at most `max_age` seconds ago (None:
        the cache's own age; each group is a Tier 2 call)."""
        member_of: list[str] = []
        for group in self._groups_for(policy, q.tool, q.pack):
            try:
                if q.requester in await self.groups.members(group, max_age=max_age):
                    member_of.append(group)
            except SLACK_FAILURES as exc:
                log.warning("user group %s unreadable for the policy: %s", group, exc)
                return Decision("deny", None, version, GROUPS_UNREAD), (), True
        arguments = self.defaults(q.tool, q.arguments)
        read_only, open_world = self.nature(q.tool)
        facts = Facts(
            q.tool, q.pack, arguments, q.channel, q.requester, tuple(member_of), *q.counts,
            read_only=read_only, open_world=open_world,
        )  # fmt: skip
        facts = with_context(facts, q.sources)
        return await decide_off_loop(policy, version, facts), facts.groups, False

    # -- who may decide --------------------------------------------------------------------
    async def refusal(
        self, user: str, q: Question, ruling: Ruling, groups: GroupMembers, fresh: bool = True
    ) -> str | None:
        """None if `user` may decide on `q` under `ruling`; else why not, in words (`fresh`:
        their reach read from Slack now; a proposal's grant check may use the cache, as the
        start of execution asks again)."""
        if ruling.outcome == "deny":
            return f"the approval policy in force forbids this action ({ruling.reason})"
        four_eyes = ruling.four_eyes or ruling.failed_closed
        if four_eyes and user == q.requester:
            return "this action needs someone other than the requester to approve it"
        if four_eyes and user == q.revised_by:
            return "you edited this action, so someone else must approve it"
        approvers = [*ruling.approvers, *escalated_to(ruling, q)]
        if not approvers:
            if four_eyes:
                return "no approvers are configured for this action"
            if user != q.requester:
                return f"only <@{q.requester}>, who asked for it, may decide"
        else:
            try:
                if not await is_approver(approvers, user, groups):
                    return "you are not one of the approvers of this action"
            except SLACK_FAILURES as exc:
                log.warning("approvers' groups unreadable: %s", type(exc).__name__)
                return UNCHECKED
        if not await self.reach.may_read(user, q.audience, fresh=fresh):
            return UNREADABLE
        return None

    async def _counts(self, vote: str, q: Question, ruling: Ruling, groups: GroupMembers) -> bool:
        """Whether one vote on the revision still counts under the ruling in force."""
        if ruling.outcome == "deny":
            return False
        if ruling.outcome == "allow":
            return True
        if vote.startswith("policy:"):
            return False  # an allow that is no longer in force
        if vote.startswith("grant:"):
            grant_id = vote.partition(":")[2]
            return grant_id.isdigit() and await self._grant_covers(int(grant_id), q, ruling, groups)
        if vote == "escalation":
            return ladder_allows(ruling, q)
        return await self.refusal(vote, q, ruling, groups) is None

    # -- grants ----------------------------------------------------------------------------
    async def _candidates(self, q: Question, ruling: Ruling) -> list[Grant]:
        scopes = tuple(s for s in ruling.record.get("grants") or () if s in grants.SCOPES)
        if ruling.failed_closed or not scopes or not q.definition:
            return []
        if not grants_stand(ruling.record):  # it followed input no grant covers
            return []
        if ruling.approvals_required != 1:
            return []
        async with self.db.reading() as session:
            return await grants.candidates(
                session,
                team_id=q.team_id,
                requester=q.requester,
                tool_name=q.tool,
                definition=q.definition,
                channel_id=q.channel,
                thread_ts=q.thread_ts or q.turn,
                scopes=scopes,
            )

    async def _covering_grant(
        self, q: Question, ruling: Ruling, groups: GroupMembers
    ) -> int | None:
        for grant in await self._candidates(q, ruling):
            if await self._grant_fits(grant, q, ruling, groups, fresh=False):
                return grant.id
        return None

    async def _grant_covers(
        self, grant_id: int, q: Question, ruling: Ruling, groups: GroupMembers
    ) -> bool:
        for grant in await self._candidates(q, ruling):
            if grant.id == grant_id:
                return await self._grant_fits(grant, q, ruling, groups)
        return False

    async def _grant_fits(
        self, grant: Grant, q: Question, ruling: Ruling, groups: GroupMembers, fresh: bool = True
    ) -> bool:
        """The grant was made on a card of this very rule, unchanged since, and its granter
        may still decide this call (an approver now, able to read what it carries)."""
        if grant.rule != ruling.rule or grant.rule_hash != ruling.record.get("rule_hash"):
            return False
        if grant.scope == "me" and not grants.self_approves(
            ruling.approvers, ruling.four_eyes, q.requester
        ):
            return False
        return await self.refusal(grant.granted_by, q, ruling, groups, fresh) is None
