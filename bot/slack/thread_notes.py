"""The short messages around cards: a note in the thread where a policy rule or a person's
grant let an action run without a card, an approver's request for changes sent back to the
requester, a reminder that a card waits, and a private word to one person. `ThreadNotes` is a
mixin of `CardPublisher`, which owns the poster and where cards go (`_destination`).

Every note states what it carries to the poster (`bot.poster`). A note about an action that ran
says what it did only where everyone in the thread may read what the action carries; otherwise
the thread learns that an action ran and under which rule or grant, and the details go to the
requester by DM, linked from the note: a DM's permalink opens for its member alone.
"""

from __future__ import annotations

import logging

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.approvals import grants
from bot.db.models import Grant, Proposal
from bot.poster import NOTHING_PRIVATE, Poster, PostRefused
from bot.slack.card_routing import carried_by
from bot.slack.cards import safe, slack_date
from bot.text import escape

log = logging.getLogger(__name__)

FAILURES = (SlackApiError, aiohttp.ClientError, TimeoutError, PostRefused)
RAN_PRIVATELY = (
    "an action ran. What it did draws on what not everyone here may read: "
    "<{link}|the details> went to <@{requester}> privately."
)
RAN_UNSAID = (
    "an action ran. What it did draws on what not everyone here may read, so it is not shown here."
)


class ThreadNotes:
    slack: AsyncWebClient
    poster: Poster

    async def _destination(self, proposal: Proposal) -> tuple[str, str | None]:
        raise NotImplementedError  # CardPublisher's: where the proposal's card goes

    async def _requester_dm(self, proposal: Proposal) -> str:
        raise NotImplementedError  # CardPublisher's: the bot's DM with the requester

    async def _note(
        self,
        proposal: Proposal,
        text: str,
        where: tuple[str, str | None] | None = None,
        *,
        carries: str,
    ) -> None:
        """A note in the proposal's thread (or `where`: its requester's DM), instead of a
        card; `carries`: the audience of what the note says."""
        channel, thread_ts = where or (proposal.channel_id, proposal.thread_ts)
        try:
            await self.poster.post(
                channel, text, carries=carries, thread_ts=thread_ts, reader=proposal.requester
            )
        except FAILURES as exc:
            log.warning("no note in the thread for proposal %s: %s", proposal.id, exc)

    async def note_in_thread(self, proposal: Proposal, text: str) -> None:
        """A note in the proposal's thread (text that carries nothing of the action's data:
        who decides it now)."""
        await self._note(proposal, text, carries=NOTHING_PRIVATE)

    async def note_allowed(self, proposal: Proposal) -> None:
        """A policy rule allowed the action."""
        rule = (proposal.policy or {}).get("rule") or "the default"
        version = (proposal.policy or {}).get("version") or "?"
        await self._note_ran(
            proposal,
            f":white_check_mark: Allowed by policy rule `{escape(str(rule))[:100]}` "
            f"(version {escape(str(version))}), no approval needed",
        )

    async def note_granted(self, proposal: Proposal, grant: Grant) -> None:
        """A person's grant covered the action."""
        scope = grants.SCOPE_WORDS.get(grant.scope, grant.scope)
        await self._note_ran(
            proposal,
            f":white_check_mark: Ran under <@{grant.granted_by}>'s grant {scope} "
            f"(grant {grant.id}; revoke it with `/approvals grants` or in the App Home)",
        )

    async def _note_ran(self, proposal: Proposal, how: str) -> None:
        """The thread's note about an action that ran without a card (`how`: by which rule
        or grant). What the action does is said where the thread may read it, else by DM."""
        said = f"{how}: {safe(proposal.description, 200)}"
        here = proposal.channel_id
        if await self.poster.cleared(here, carried_by(proposal), proposal.requester):
            await self._note(proposal, said, carries=carried_by(proposal))
            return
        link = await self._said_privately(proposal, f"{said}\n_(in <#{here}>)_")
        told = RAN_PRIVATELY if link else RAN_UNSAID
        text = f"{how}: " + told.format(link=link, requester=proposal.requester)
        await self._note(proposal, text, carries=NOTHING_PRIVATE)

    async def _said_privately(self, proposal: Proposal, text: str) -> str | None:
        """`text` to the requester by DM; the message's permalink (None: not sent)."""
        try:
            dm = await self._requester_dm(proposal)
            posted = await self.poster.post(
                dm, text, carries=carried_by(proposal), reader=proposal.requester
            )
            found = await self.slack.chat_getPermalink(
                channel=str(posted["channel"]), message_ts=str(posted["ts"])
            )
        except FAILURES as exc:
            log.warning("no private note for proposal %s: %s", proposal.id, type(exc).__name__)
            return None
        link = str(found.get("permalink") or "")
        return link if link.startswith("https://") and not set(link) & set("<|>") else None

    async def note_changes_asked(self, proposal: Proposal) -> None:
        """An approver asked for changes: their note goes back to the requester, where the
        card went (the thread, or the requester's DM when the thread may not read what the
        action carries). The note is a person's text: escaped, so it pings nobody."""
        text = (
            f":pencil2: <@{proposal.requester}>, <@{proposal.decided_by}> asked for changes to "
            f"“{safe(proposal.description, 200)}” instead of approving it: "
            f"{safe(proposal.decline_reason or 'no note', 1500)}"
        )
        try:
            where = await self._destination(proposal)
        except FAILURES as exc:
            log.warning("no changes note for proposal %s: %s", proposal.id, type(exc).__name__)
            return
        await self._note(proposal, text, where, carries=carried_by(proposal))

    async def remind(self, proposal: Proposal) -> None:
        """A reminder in the thread that a card waits for a decision."""
        text = (
            f":alarm_clock: <@{proposal.requester}>, an action waits for a decision and "
            f"expires {slack_date(proposal.expires_at)}: {safe(proposal.description, 200)}"
        )
        # Where the card is: a card sent privately is reminded of privately too.
        channel = proposal.card_channel or proposal.channel_id
        thread_ts = proposal.thread_ts if channel == proposal.channel_id else None
        try:  # no reader named: a DM's is Slack's to say
            await self.poster.post(channel, text, carries=carried_by(proposal), thread_ts=thread_ts)
        except Exception as exc:  # a missed reminder must not stop the sweep
            log.warning("reminder for proposal %s failed: %s", proposal.id, type(exc).__name__)

    async def tell(self, channel: str, user: str, text: str, thread_ts: str | None) -> None:
        """An ephemeral note to one person (e.g. why their click changed nothing): the bot's
        own words, which carry nothing private."""
        try:
            await self.poster.ephemeral(
                channel, user, text, carries=NOTHING_PRIVATE, thread_ts=thread_ts
            )
        except FAILURES as exc:
            log.warning("could not tell %s: %s", user, type(exc).__name__)
