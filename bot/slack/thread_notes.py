"""The short messages around cards: a note in the thread where a policy rule or a person's
grant let an action run without a card, an approver's request for changes sent back to the
requester, a reminder that a card waits, and a private word to one person. `ThreadNotes` is a
mixin of `CardPublisher`, which owns the Slack client and where cards go (`_destination`)."""

from __future__ import annotations

import logging

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.approvals import grants
from bot.db.models import Grant, Proposal
from bot.slack.cards import safe, slack_date
from bot.text import escape

log = logging.getLogger(__name__)


class ThreadNotes:
    slack: AsyncWebClient

    async def _destination(self, proposal: Proposal) -> tuple[str, str | None]:
        raise NotImplementedError  # CardPublisher's: where the proposal's card goes

    async def _note(
        self, proposal: Proposal, text: str, where: tuple[str, str | None] | None = None
    ) -> None:
        """A note in the proposal's thread (or `where`), instead of a card (no link previews)."""
        channel, thread_ts = where or (proposal.channel_id, proposal.thread_ts)
        try:
            await self.slack.chat_postMessage(
                channel=channel,
                thread_ts=thread_ts,
                text=text,
                unfurl_links=False,
                unfurl_media=False,
            )
        except (SlackApiError, aiohttp.ClientError, TimeoutError) as exc:
            log.warning("no note in the thread for proposal %s: %s", proposal.id, exc)

    async def note_in_thread(self, proposal: Proposal, text: str) -> None:
        """A note in the proposal's thread (text that carries nothing of the action's data)."""
        await self._note(proposal, text)

    async def note_allowed(self, proposal: Proposal) -> None:
        """A policy rule allowed the action."""
        rule = (proposal.policy or {}).get("rule") or "the default"
        version = (proposal.policy or {}).get("version") or "?"
        await self._note(
            proposal,
            f":white_check_mark: Allowed by policy rule `{escape(str(rule))[:100]}` "
            f"(version {escape(str(version))}), no approval needed: "
            f"{escape(proposal.description[:200])}",
        )

    async def note_granted(self, proposal: Proposal, grant: Grant) -> None:
        """A person's grant covered the action."""
        scope = grants.SCOPE_WORDS.get(grant.scope, grant.scope)
        await self._note(
            proposal,
            f":white_check_mark: Ran under <@{grant.granted_by}>'s grant {scope} "
            f"(grant {grant.id}; revoke it with `/approvals grants` or in the App Home): "
            f"{escape(proposal.description[:200])}",
        )

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
        except (SlackApiError, aiohttp.ClientError, TimeoutError) as exc:
            log.warning("no changes note for proposal %s: %s", proposal.id, type(exc).__name__)
            return
        await self._note(proposal, text, where)

    async def remind(self, proposal: Proposal) -> None:
        """A reminder in the thread that a card waits for a decision."""
        text = (
            f":alarm_clock: <@{proposal.requester}>, an action waits for a decision and "
            f"expires {slack_date(proposal.expires_at)}: {escape(proposal.description[:200])}"
        )
        # Where the card is: a card sent privately is reminded of privately too.
        channel = proposal.card_channel or proposal.channel_id
        thread_ts = proposal.thread_ts if channel == proposal.channel_id else None
        try:
            await self.slack.chat_postMessage(channel=channel, thread_ts=thread_ts, text=text)
        except Exception as exc:  # a missed reminder must not stop the sweep
            log.warning("reminder for proposal %s failed: %s", proposal.id, type(exc).__name__)

    async def tell(self, channel: str, user: str, text: str, thread_ts: str | None) -> None:
        """An ephemeral note to one person (e.g. why their click changed nothing)."""
        try:
            await self.slack.chat_postEphemeral(
                channel=channel, user=user, text=text, thread_ts=thread_ts
            )
        except (SlackApiError, aiohttp.ClientError, TimeoutError) as exc:
            log.warning("could not tell %s: %s", user, type(exc).__name__)
