"""Posting approval cards and keeping them in step with their proposal.

`refresh` never waits: it marks the card as behind and a per-proposal task brings it in line,
re-reading the proposal each pass so the last edit shows the newest state. Card edits share the
workspace's `chat.update` budget with live replies (as final-priority edits), so a click never
waits on that budget. A failed edit is retried with backoff until it lands; the card's shown
version is stored, so edits lost to a crash are redone by the sweeper on any replica.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot import audience
from bot.approvals.escalation import Escalated
from bot.approvals.policy import GroupMembers, Policies
from bot.approvals.service import ApprovalsService, UnknownProposal
from bot.db.models import Proposal
from bot.errors import slack_error
from bot.keyed_messages import find_keyed, keyed
from bot.membership import reach_of
from bot.poster import NOTHING_PRIVATE, poster_of
from bot.slack.card_fan_out import CARD_EVENT, CardFanOut
from bot.slack.card_misses import CHANNEL, REQUESTER, THREAD
from bot.slack.card_people import PeopleNames
from bot.slack.card_routing import SLACK_FAILURES, carried_by, reason_of, waiting_note
from bot.slack.card_view import card_view
from bot.slack.cards import CardView, approval_card, slack_date
from bot.slack.edit_budget import EditBudget
from bot.slack.thread_notes import ThreadNotes
from bot.tasks import TaskGroup
from bot.tools.catalog import ToolRegistry

log = logging.getLogger(__name__)

RETRY_DELAYS = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
__all__ = ["CARD_EVENT", "CardPublisher"]
SENT_PRIVATELY = (
    ":lock: _The approval card for this action went to <@{requester}> privately: it carries "
    "what not everyone here may read, so only people who can read it may decide on it._"
)


@dataclass
class CardEdit:
    wants_final: bool = True
    last_edit_at: float | None = None
    lane: str = "card"  # takes turns with replies' final edits


class CardPublisher(ThreadNotes, CardFanOut):
    def __init__(
        self,
        slack: AsyncWebClient,
        budget: EditBudget,
        approvals: ApprovalsService,
        registry: ToolRegistry,
        policies: Policies,
        tasks: TaskGroup,
        groups: GroupMembers | None = None,
    ) -> None:
        self.slack = slack
        self.poster = poster_of(slack)
        self.people_names = PeopleNames(slack)
        self.groups = groups or GroupMembers(slack)
        self._routing_init()
        self.budget = budget
        self.approvals = approvals
        self.registry = registry
        self.policies = policies
        self.tasks = tasks
        self._behind: set[int] = set()
        self._workers: dict[int, asyncio.Task[None]] = {}
        # What each card last showed, so a click that changed nothing costs no chat.update.
        self._shown: OrderedDict[int, str] = OrderedDict()
        # Told after a card changed (the App Home of the people concerned follows it).
        self.on_change: Callable[[Proposal, list[str]], None] | None = None

    def _same_as_shown(self, proposal_id: int, text: str, blocks: list[dict[str, object]]) -> bool:
        return self._shown.get(proposal_id) == json.dumps([text, blocks], sort_keys=True)

    def _remember(self, proposal_id: int, text: str, blocks: list[dict[str, object]]) -> None:
        self._shown[proposal_id] = json.dumps([text, blocks], sort_keys=True)
        self._shown.move_to_end(proposal_id)
        while len(self._shown) > 2000:
            self._shown.popitem(last=False)

    async def view(self, proposal: Proposal) -> CardView:
        people = await self.people_names.named_in(self.registry, proposal)
        return self.view_with(proposal, await self.approvals.approvers_of(proposal.id), people)

    def view_with(
        self, proposal: Proposal, approvers: list[str], people: dict[str, str] | None = None
    ) -> CardView:
        tool = self.registry.get(proposal.tool_name)
        return card_view(proposal, approvers, people or {}, tool, self.policy_of(proposal))

    async def post(self, proposal: Proposal) -> bool:
        """Post the card; False if Slack refused (the proposal then waits without a card, and
        the turn says so). The card carries the proposal's key in its message metadata, so a
        poster taking over from one that died finds that poster's card instead of adding a
        second one."""
        claim = await self.approvals.claim_card(proposal.id)
        if claim is None:
            return True  # posted (or being posted) by someone else
        text, blocks = approval_card(await self.view(proposal))
        target = THREAD  # where the card was going, for the note if Slack refuses it
        try:
            route = await self.route(proposal)
            if route is not None and route.channel is None:
                return await self._post_routed(proposal, list(route.recipients), text, blocks,
                                               claim.takeover)  # fmt: skip
            if route is not None and route.channel:
                where, thread_ts, target = route.channel, None, CHANNEL
            elif await self._thread_may_read(proposal):
                where, thread_ts = proposal.channel_id, proposal.thread_ts
            else:  # for the requester alone, by DM
                target = REQUESTER
                where, thread_ts = await self._requester_dm(proposal), None
            earlier = (
                await find_keyed(
                    self.slack,
                    where,
                    CARD_EVENT,
                    proposal.idempotency_key,
                    thread_ts=thread_ts,
                    oldest=f"{proposal.created_at.timestamp() - 60:.6f}",
                )
                if claim.takeover
                else None
            )
            if earlier is not None:
                channel, ts = where, earlier
                await self.budget.acquire(CardEdit())
                await self.poster.update(
                    channel, ts, text, carries=carried_by(proposal), blocks=blocks,
                    reader=None if route else proposal.requester,
                )  # fmt: skip
            else:
                posted = await self.poster.post(
                    where,
                    text,
                    carries=carried_by(proposal),  # the card shows every character of the write
                    thread_ts=thread_ts,
                    blocks=blocks,
                    metadata=keyed(CARD_EVENT, proposal.idempotency_key),
                    reader=None if route else proposal.requester,  # its thread, or their DM
                )
                channel, ts = str(posted["channel"]), str(posted["ts"])
                if route is not None:
                    names = await self.people(self.policy_of(proposal).approvers, proposal)
                    await self._note(proposal, waiting_note(names, where), carries=NOTHING_PRIVATE)
                elif where != proposal.channel_id:
                    await self._say_sent_privately(proposal)
        except SLACK_FAILURES as exc:
            log.error("could not post the card of proposal %s: %s", proposal.id, reason_of(exc))
            await self.approvals.release_card(proposal.id)
            await self.tell_unplaced(proposal, target, reason_of(exc))
            return False
        self._remember(proposal.id, text, blocks)
        await self.approvals.set_card(proposal.id, channel, ts)
        await self.approvals.card_shown(proposal.id, proposal.version)
        return True

    async def _post_routed(
        self,
        proposal: Proposal,
        recipients: list[str],
        text: str,
        blocks: list[dict[str, object]],
        takeover: bool,
    ) -> bool:
        """One copy per approver by DM; the first is the card of record. The thread is told
        who was notified."""
        sent = await self.post_copies(proposal, recipients, text, blocks, "route", takeover)
        copies = await self.approvals.copies_of(proposal.id)
        if not copies:
            await self.approvals.release_card(proposal.id)
            await self.tell_missed(proposal, sent.missed, retried=True)  # the sweeper will
            return False
        self._remember(proposal.id, text, blocks)
        await self.approvals.set_card(proposal.id, copies[0].channel, copies[0].ts)
        await self.approvals.card_shown(proposal.id, proposal.version)
        await self._note(proposal, waiting_note(sent.reached), carries=NOTHING_PRIVATE)
        await self.tell_missed(proposal, sent.missed)
        return True

    async def remind(self, proposal: Proposal) -> None:
        """Before expiry: a card routed to approvers is reminded of where they have it."""
        if await self.approvals.copies_of(proposal.id):
            try:
                await self.remind_copies(proposal, f"Expires {slack_date(proposal.expires_at)}")
            except SLACK_FAILURES as exc:  # a missed reminder must not stop the sweep
                log.warning("reminder for %s failed: %s", proposal.id, type(exc).__name__)
            return
        await super().remind(proposal)

    async def on_escalation(self, step: Escalated) -> None:
        """A step of the ladder was taken: its notices (the cards follow by `refresh`)."""
        text, blocks = approval_card(await self.view(step.proposal))
        await self._notify_escalation(step, text, blocks)

    async def _destination(self, proposal: Proposal) -> tuple[str, str | None]:
        """Where the card goes: its thread, unless what the action carries may not be read by
        everyone there (a private channel's text proposed in a public thread); then to the
        requester alone, by DM, and only people who may read it can decide on it."""
        if await self._thread_may_read(proposal):
            return proposal.channel_id, proposal.thread_ts
        return await self._requester_dm(proposal), None

    async def _thread_may_read(self, proposal: Proposal) -> bool:
        where = audience.place(proposal.channel_id, proposal.requester, is_dm=False)
        return await reach_of(self.slack).covers(where, proposal.audience)

    async def _requester_dm(self, proposal: Proposal) -> str:
        return await self.dm_of(proposal.requester)

    async def _say_sent_privately(self, proposal: Proposal) -> None:
        text = SENT_PRIVATELY.format(requester=proposal.requester)
        await self._note(proposal, text, carries=NOTHING_PRIVATE)

    def refresh(self, proposal_id: int) -> None:
        """Bring the card in line with its proposal soon; returns at once."""
        self._behind.add(proposal_id)
        worker = self._workers.get(proposal_id)
        if worker is not None and not worker.done():
            return
        task = self.tasks.spawn(self._keep_in_step(proposal_id), name=f"card-{proposal_id}")
        if task is not None:
            self._workers[proposal_id] = task
            task.add_done_callback(lambda _t: self._workers.pop(proposal_id, None))

    async def _keep_in_step(self, proposal_id: int) -> None:
        failures = 0
        while proposal_id in self._behind:
            self._behind.discard(proposal_id)
            try:
                await self._edit(proposal_id)
                failures = 0
            except UnknownProposal:
                return
            except Exception as exc:  # transient: Slack 5xx/429, network, database
                reason = slack_error(exc) if isinstance(exc, SlackApiError) else type(exc).__name__
                delay = RETRY_DELAYS[min(failures, len(RETRY_DELAYS) - 1)]
                failures += 1
                log.warning(
                    "card %s not updated (%s); retrying in %.0fs", proposal_id, reason, delay
                )
                self._behind.add(proposal_id)
                await asyncio.sleep(delay)

    async def _edit(self, proposal_id: int) -> None:
        proposal, approvers = await self.approvals.with_approvers(proposal_id)
        if not proposal.card_ts or not proposal.card_channel:
            return
        people = await self.people_names.named_in(self.registry, proposal)
        text, blocks = approval_card(self.view_with(proposal, approvers, people))
        if not self._same_as_shown(proposal_id, text, blocks):
            await self.update_card(
                CardEdit(), proposal.card_channel, proposal.card_ts, text, blocks,
                carried_by(proposal),
            )  # fmt: skip
            self._remember(proposal_id, text, blocks)
            if self.on_change is not None:
                self.on_change(proposal, approvers)
        await self.edit_copies(proposal, text, blocks)
        if proposal.card_version is None or proposal.card_version < proposal.version:
            await self.approvals.card_shown(proposal_id, proposal.version)
