"""The "Show all N characters" and "…and N more fields" buttons of a card: a modal with every
character of a value, or with the fields the card had no room for.

The button carries ids only (proposal, revision, digest, part); the modal is built from the
proposal's arguments, and only while they are still the revision and digest the clicked card
showed: a click on an older card opens nothing and its clicker is told, privately, that the card
changed. Only people who may read the card's channel may open it (the arguments are as private
as the card). Clicks are acknowledged at once; the modal opens with the click's trigger id.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp

from bot.approvals.service import ApprovalError, ApprovalsService, CardChanged
from bot.db.models import Proposal
from bot.metrics import DECISIONS
from bot.slack.access import ChannelAccess
from bot.slack.card_fields import field_rows
from bot.slack.card_people import kinds_of
from bot.slack.card_publisher import CardPublisher
from bot.slack.card_values import (
    MORE,
    ROWS_ON_CARD,
    SHOW_ALL,
    CardRef,
    digest_of,
    more_modal,
    value_modal,
)
from bot.slack.payloads import BadPayload, Click, parse_click
from bot.tasks import TaskGroup
from bot.tools.catalog import ToolRegistry
from bot.tools.shown import shown_arguments
from bot.tools.shown_notes import Mentions, mentions_of

log = logging.getLogger(__name__)

NOT_YOURS = "Only people who can read this card's channel can see what its action sends."


@dataclass
class ShowAll:
    approvals: ApprovalsService
    registry: ToolRegistry
    access: ChannelAccess
    cards: CardPublisher
    tasks: TaskGroup

    async def _tell(self, click: Click, proposal: Proposal | None, text: str) -> None:
        channel = click.channel or (proposal.card_channel if proposal else None)
        if channel:
            await self.cards.tell(channel, click.user, text, click.thread_ts)

    def _mentions(self, proposal: Proposal) -> Mentions:
        return mentions_of(self.registry.get(proposal.tool_name))

    async def open(self, body: dict[str, Any], client: Any) -> None:
        try:
            click = parse_click(body)
            if click.part is None or not click.trigger_id:
                raise BadPayload("not a Show all button")
        except BadPayload as exc:
            log.info("refused a show-all payload: %s", exc)
            DECISIONS.labels(action="show_all", result="bad_input").inc()
            return
        try:
            proposal = await self.approvals.get(click.proposal_id)
        except ApprovalError as exc:
            await self._tell(click, None, exc.user_message)
            return
        channel = proposal.card_channel or proposal.channel_id
        if not (
            await self.access.can_read(channel, click.user)
            and await self.access.may_read(click.user, proposal.audience)
        ):
            await self.approvals.refuse(proposal.id, click.user, "show_all", "cannot read")
            DECISIONS.labels(action="show_all", result="refused").inc()
            await self._tell(click, proposal, NOT_YOURS)
            return
        digest = digest_of(proposal.arguments_hash)
        if click.revision != proposal.revision or click.digest != digest:
            DECISIONS.labels(action="show_all", result="stale").inc()
            await self._tell(click, proposal, CardChanged().user_message)
            self.cards.refresh(proposal.id)
            return
        people = (
            await self.cards.people_names.named_in(self.registry, proposal)
            if click.part == MORE
            else {}
        )
        view = self.view(proposal, click.part, digest, people)
        if view is None:
            DECISIONS.labels(action="show_all", result="bad_input").inc()
            return
        if click.in_modal:
            await client.views_push(trigger_id=click.trigger_id, view=view)
        else:
            await client.views_open(trigger_id=click.trigger_id, view=view)
        DECISIONS.labels(action="show_all", result="accepted").inc()

    def view(
        self, proposal: Proposal, part: str, digest: str, people: dict[str, str]
    ) -> dict[str, Any] | None:
        """The modal for `part` of the proposal's current revision; None if it has no such
        part (a crafted value). "More fields" holds the rows past the card's, in its order."""
        arguments = dict(proposal.arguments)
        values = shown_arguments(arguments, self._mentions(proposal))
        ref = CardRef(proposal.id, proposal.revision, digest)
        if part == MORE:
            kinds = kinds_of(self.registry.get(proposal.tool_name))
            rows = field_rows(values, arguments, list(proposal.preview), kinds, people)
            return more_modal(rows[ROWS_ON_CARD:], ref, proposal.description)
        index = int(part[1:])
        if index >= len(values):
            return None
        return value_modal(values[index], ref, part, proposal.description)

    def register(self, app: AsyncApp) -> None:
        @app.action(SHOW_ALL)
        async def _show_all(ack: AsyncAck, body: dict[str, Any], client: Any) -> None:
            await ack()  # within Slack's 3 s; the modal opens from a tracked task
            self.tasks.spawn(self.open(body, client), name="show-all")
