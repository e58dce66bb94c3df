"""A card's copies in approvers' DMs: posting them (routing and escalation), keeping them in
step with the proposal, and the escalation ladder's notices.

The first copy is the card of record (`card_channel`/`card_ts`); every copy is recorded as it
is posted, and a poster taking over from one that died looks for its copy (by the key in its
metadata) before posting one. Copies other than the card of record are edited at the pace of
intermediate edits, after live replies' final texts: an approver clicking a copy that is
behind is told what happened by the state machine, never a second decision.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.approvals.escalation import Escalated
from bot.approvals.service import ApprovalsService
from bot.db.models import Proposal
from bot.errors import retryable, slack_error
from bot.keyed_messages import find_keyed, keyed
from bot.metrics import SLACK_EDITS
from bot.poster import NOTHING_PRIVATE, Poster, PostRefused
from bot.slack.card_misses import CardMisses, Delivery
from bot.slack.card_routing import SLACK_FAILURES, CardRouting, carried_by, waiting_note
from bot.slack.card_text import safe
from bot.slack.edit_budget import EditBudget, Editor
from bot.states import State

log = logging.getLogger(__name__)

CARD_EVENT = "countersign_card"  # message metadata type of approval cards
PASSING = frozenset({State.APPROVED, State.EXECUTING})


@dataclass
class _CopyEdit:
    """A copy's edit waits like a reply's intermediate edit: finals go first."""

    wants_final: bool = False
    last_edit_at: float | None = None
    lane: str = "copies"


class CardFanOut(CardMisses, CardRouting):
    slack: AsyncWebClient
    approvals: ApprovalsService
    budget: EditBudget

    poster: Poster

    async def post_copies(
        self,
        proposal: Proposal,
        recipients: list[str],
        text: str,
        blocks: list[dict[str, Any]],
        reason: str,
        takeover: bool = False,
    ) -> Delivery:
        """Send the card to each recipient without one yet: everyone who now has a copy, and
        whom Slack refused (the caller says so, once, after its own note)."""
        have = {c.recipient for c in await self.approvals.copies_of(proposal.id)}
        oldest = f"{proposal.created_at.timestamp() - 60:.6f}"

        async def post(user: str, channel: str) -> None:
            ts = (
                await find_keyed(self.slack, channel, CARD_EVENT, proposal.idempotency_key,
                                 oldest=oldest)
                if takeover
                else None
            )  # fmt: skip
            if ts is None:
                posted = await self.poster.post(
                    channel,
                    text,
                    carries=carried_by(proposal),
                    blocks=blocks,
                    metadata=keyed(CARD_EVENT, proposal.idempotency_key),
                    reader=user,  # the bot's DM with this approver
                )
                channel, ts = str(posted["channel"]), str(posted["ts"])
            await self.approvals.add_copy(proposal.id, user, channel, ts, reason, proposal.version)

        missed = await self.fan_out([u for u in recipients if u not in have], post)
        reached = [c.recipient for c in await self.approvals.copies_of(proposal.id)]
        return Delivery(reached, {u: why for u, why in missed.items() if u not in reached})

    async def edit_copies(
        self, proposal: Proposal, text: str, blocks: list[dict[str, Any]]
    ) -> None:
        """Bring every copy but the card of record in line (that one `_edit` did). Copies
        skip the moments between a decision and its outcome (approved, executing): an approver
        reading a DM needs the decision and how it ended, and a big group's copies would
        otherwise spend the workspace's edits on each step."""
        if State(proposal.state) in PASSING:
            return
        for copy in await self.approvals.copies_of(proposal.id):
            if copy.shown_version is not None and copy.shown_version >= proposal.version:
                continue
            if (copy.channel, copy.ts) != (proposal.card_channel, proposal.card_ts):
                editor = _CopyEdit(last_edit_at=time.monotonic())
                await self.update_card(
                    editor,
                    copy.channel,
                    copy.ts,
                    text,
                    blocks,
                    carried_by(proposal),
                    copy.recipient,
                )
            await self.approvals.copy_shown(copy.id, proposal.version)

    async def update_card(
        self,
        editor: Editor,
        channel: str,
        ts: str,
        text: str,
        blocks: list[dict[str, Any]],
        carries: str,
        reader: str | None = None,
    ) -> None:
        """One card message edited within the workspace's `chat.update` budget; an edit
        Slack (or the poster) refuses for good is logged, a transient one raised."""
        await self.budget.acquire(editor)
        try:
            await self.poster.update(
                channel, ts, text, carries=carries, blocks=blocks, reader=reader
            )
        except PostRefused:
            return  # logged by the poster; its readers may no longer read what it carries
        except SlackApiError as exc:
            if retryable(exc):
                raise
            log.warning("card %s/%s cannot be updated: %s", channel, ts, slack_error(exc))
        SLACK_EDITS.labels(kind="card").inc()

    async def _notify_escalation(
        self, step: Escalated, text: str, blocks: list[dict[str, Any]]
    ) -> None:
        """Tell people what a step of the ladder did: a reminder to the approvers, the card
        to the people it adds (and a note in the thread). A terminal step shows on the card."""
        proposal = step.proposal
        after = _words(step.step.after.total_seconds())
        try:
            if step.step.kind == "notify":
                added = await self.people(step.step.to, proposal)
                sent = await self.post_copies(proposal, added, text, blocks, "escalation")
                told = [u for u in added if u not in sent.missed]
                if told:
                    await self._note(
                        proposal,
                        f":arrow_up: Nobody answered in {after}: escalated. "
                        + waiting_note(told)[len(":hourglass_flowing_sand: ") :],
                        carries=NOTHING_PRIVATE,
                    )
                await self.tell_missed(proposal, sent.missed)
            elif step.step.kind == "remind":
                await self._remind_approvers(proposal, after)
        except SLACK_FAILURES as exc:  # the step is taken; its notice is best effort
            log.warning("escalation notice for %s failed: %s", proposal.id, type(exc).__name__)

    async def _remind_approvers(self, proposal: Proposal, after: str) -> None:
        await self.remind_copies(proposal, f"Still waiting after {after}")

    async def remind_copies(self, proposal: Proposal, why: str) -> None:
        """A reminder under each DM copy and, naming the approvers, in the thread."""
        copies = await self.approvals.copies_of(proposal.id)
        line = f":alarm_clock: {why}: {safe(proposal.description, 200)}"
        for copy in copies:  # in each DM, under the copy
            await self.poster.post(
                copy.channel,
                line,
                carries=carried_by(proposal),
                thread_ts=copy.ts,
                reader=copy.recipient,
            )
        people = [c.recipient for c in copies] or await self.people(
            self.policy_of(proposal).approvers, proposal
        )
        if people:
            shown = ", ".join(f"<@{p}>" for p in people[:10])
            text = f":alarm_clock: {why}, for {shown} to decide."
            await self._note(proposal, text, carries=NOTHING_PRIVATE)


def _words(seconds: float) -> str:
    if seconds >= 86400 and seconds % 86400 == 0:
        return f"{int(seconds // 86400)} d"
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{int(seconds // 3600)} h"
    if seconds >= 60:
        return f"{int(seconds // 60)} min"
    return f"{int(seconds)} s"
