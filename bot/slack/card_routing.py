"""Where a card goes when its approvers are elsewhere (`route:` in the policy's ask rule).

- `thread` (the default): the card goes to the thread, unless no approver is in that
  channel, or the thread may not read what the action carries; then as for `dm`.
- `dm`: one copy of the card to each approver by direct message (user groups expanded, at
  most `MAX_FANOUT` people), and a note in the thread naming who was notified.
- `channel:C123`: the card goes to that approvers' channel, if everyone there may read what
  the action carries; otherwise as for `dm`.

Only people who may read what the action carries are sent it (nobody learns by a DM what
Slack would not show them), and under four-eyes the requester is not among them. Whoever
receives a card, a click on it is authorised again when it is clicked.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot import audience
from bot.approvals.policy import GroupMembers, Policies, Policy
from bot.db.models import Proposal
from bot.errors import retryable, slack_error
from bot.membership import members_of, reach_of
from bot.poster import PostRefused
from bot.tools.catalog import ToolRegistry

log = logging.getLogger(__name__)

MAX_FANOUT = 50  # DMs per card: a bigger group is better served by an approvers' channel
POSTING_AT_ONCE = 4  # DMs in flight together (each is its own channel for Slack's limits)
NAMED_IN_NOTE = 10  # people named in the thread's note; the rest are counted
# What a post may end in besides success (the poster's refusal included: never retried).
SLACK_FAILURES = (SlackApiError, aiohttp.ClientError, TimeoutError, PostRefused)
REFUSED_BY_POSTER = "not_readable_there"  # the poster's refusal, as a reason code


def reason_of(exc: BaseException) -> str:
    """Why a post failed, as a short code for the log and the record (never shown to people):
    Slack's error code, prefixed `transient:` where trying again may cure it."""
    if isinstance(exc, PostRefused):
        return REFUSED_BY_POSTER
    code = slack_error(exc) if isinstance(exc, SlackApiError) else type(exc).__name__
    return f"transient:{code}" if retryable(exc) else code


@dataclass(frozen=True)
class Route:
    channel: str | None  # an approvers' channel for the one card; None: DMs
    recipients: tuple[str, ...]  # approvers sent a copy by DM


def carried_by(proposal: Proposal) -> str:
    """What a proposal's card and notes carry: its audience; one made before audiences were
    recorded is taken as its own thread's data."""
    if proposal.audience is not None:
        return proposal.audience
    return audience.channel(proposal.channel_id)


def waiting_note(names: list[str], where: str | None = None) -> str:
    """The thread's note: who the action waits for, and that they were notified."""
    shown = ", ".join(f"<@{n}>" for n in names[:NAMED_IN_NOTE])
    more = f" and {len(names) - NAMED_IN_NOTE} more" if len(names) > NAMED_IN_NOTE else ""
    place = f" in <#{where}>" if where else " by direct message"
    return f":hourglass_flowing_sand: Waiting for {shown}{more} (notified{place})."


class CardRouting:
    slack: AsyncWebClient
    groups: GroupMembers
    policies: Policies
    registry: ToolRegistry

    def _routing_init(self) -> None:
        self._dms: OrderedDict[str, str] = OrderedDict()  # user -> their DM with the bot

    def policy_of(self, proposal: Proposal) -> Policy:
        tool = self.registry.get(proposal.tool_name)
        return self.policies.for_proposal(
            proposal.tool_name, tool.pack if tool else "", proposal.policy
        )

    async def people(self, entries: tuple[str, ...] | list[str], proposal: Proposal) -> list[str]:
        """The users behind `entries` (user groups expanded) who may receive this card."""
        policy = self.policy_of(proposal)
        users: list[str] = []
        for entry in entries:
            if entry.startswith("S"):
                try:
                    users.extend(sorted(await self.groups.members(entry)))
                except SLACK_FAILURES as exc:
                    log.warning("user group %s unreadable for routing: %s", entry, exc)
            else:
                users.append(entry)
        reach = reach_of(self.slack)
        chosen: list[str] = []
        for user in dict.fromkeys(users):
            if policy.four_eyes and user == proposal.requester:
                continue
            if not await reach.may_read(user, proposal.audience):
                continue
            if len(chosen) == MAX_FANOUT:
                log.warning("proposal %s: approvers past %d not notified", proposal.id, MAX_FANOUT)
                break
            chosen.append(user)
        return chosen

    async def route(self, proposal: Proposal) -> Route | None:
        """Where the card goes if not simply to its thread; None: the thread (or, as before,
        privately to the requester when it decides and the thread may not read it)."""
        policy = self.policy_of(proposal)
        if not policy.approvers:
            return None  # the requester decides, in their own thread
        way = str((proposal.policy or {}).get("route") or "thread")
        reach = reach_of(self.slack)
        if way.startswith("channel:"):
            target = way.partition(":")[2]
            if await reach.covers(audience.place(target, "", is_dm=False), proposal.audience):
                return Route(target, ())
        elif way == "thread":
            here = audience.place(proposal.channel_id, proposal.requester, is_dm=False)
            if await reach.covers(here, proposal.audience) and await self._approver_here(
                proposal, policy
            ):
                return None
        recipients = await self.people(policy.approvers, proposal)
        return Route(None, tuple(recipients)) if recipients else None

    async def _approver_here(self, proposal: Proposal, policy: Policy) -> bool:
        """Whether an approver is a member of the proposal's channel (so sees the card)."""
        try:
            here = await members_of(self.slack, proposal.channel_id)
            if policy.four_eyes:  # the requester is there, but may not approve
                here = here - {proposal.requester}
            for entry in policy.approvers:
                if entry in here:
                    return True
                if entry.startswith("S") and here & await self.groups.members(entry):
                    return True
        except SLACK_FAILURES as exc:
            log.warning("membership of %s unknown: %s", proposal.channel_id, exc)
            return True  # as before routing: the card goes to its thread
        return False

    async def dm_of(self, user: str) -> str:
        """The bot's DM with `user` (remembered: opening it again is a Tier 3 call)."""
        found = self._dms.get(user)
        if found is None:
            opened = await self.slack.conversations_open(users=user)
            found = str((opened.get("channel") or {}).get("id"))
            self._dms[user] = found
            while len(self._dms) > 5000:
                self._dms.popitem(last=False)
        return found

    async def fan_out(
        self, recipients: list[str], post: Callable[[str, str], Awaitable[None]]
    ) -> dict[str, str]:
        """Post to each recipient (a few at a time); those not reached, with why (a code)."""
        gate = asyncio.Semaphore(POSTING_AT_ONCE)
        missed: dict[str, str] = {}

        async def one(user: str) -> None:
            async with gate:
                try:
                    await post(user, await self.dm_of(user))
                except SLACK_FAILURES as exc:
                    missed[user] = reason_of(exc)

        await asyncio.gather(*(one(u) for u in recipients))
        return {u: missed[u] for u in recipients if u in missed}  # in the policy's order
