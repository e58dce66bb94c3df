"""`/approvals` and the App Home: what waits for a person's decision (only what they may decide,
with a link to each card) and what they asked for or decided lately."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.approvals.policy import GroupMembers, Policies, may_approve
from bot.approvals.questions import question_of
from bot.approvals.ruling import Authorise, Step
from bot.db.models import Proposal, utcnow
from bot.db.session import Database
from bot.membership import reach_of
from bot.records import proposal_queries, queries
from bot.slack import grant_views
from bot.slack import record_views as views
from bot.slack.access import ChannelAccess
from bot.slack.approvals_view import Listed, approvals_view
from bot.slack.home_view import home_view
from bot.slack.record_lines import reply_link
from bot.slack.usage import UsageViews
from bot.tasks import TaskGroup
from bot.tools.catalog import ToolRegistry

log = logging.getLogger(__name__)


class ApprovalsAndHome:
    """What waits for each person's decision, and their App Home tab."""

    def __init__(
        self,
        db: Database,
        slack: AsyncWebClient,
        registry: ToolRegistry,
        policies: Policies,
        groups: GroupMembers,
        tasks: TaskGroup,
    ) -> None:
        self.db = db
        self.slack = slack
        self.registry = registry
        self.policies = policies
        self.groups = groups
        self.tasks = tasks
        self.access = ChannelAccess(slack)
        # People who opened the Home tab since this process started: only their tabs are
        # refreshed on changes (anyone else gets a fresh one when they open it), one refresh at
        # a time per person, coalescing bursts.
        self._home_users: set[str] = set()
        self._home_running: dict[str, bool] = {}
        self._home_pages: dict[str, int] = {}  # the page of recent work each person looks at
        # The one door: who may decide each waiting proposal (set by the app).
        self.door: Authorise | None = None
        # (channel, user): a person opened the bot's DM (suggested prompts; set by the app).
        self.on_messages_tab: Callable[[str, str], Awaitable[None]] | None = None
        # /usage, the Home's "Your usage" and /history's cost per turn (set by the app).
        self.usage: UsageViews | None = None

    async def team_url(self) -> str | None:
        try:
            return await reach_of(self.slack).site()
        except SlackApiError:
            return None

    # -- /approvals --------------------------------------------------------------------------
    async def _waiting_for(self, team: str, user: str) -> list[Proposal]:
        async with self.db.transaction() as session:
            only_own = None if self.policies.anyone_else_approves else user
            candidates = await proposal_queries.waiting_proposals(session, team, only_own)
            voted = await proposal_queries.voted_by(session, user)
        waiting = []
        for proposal in candidates:
            if proposal.id in voted or not await self.access.may_read(user, proposal.audience):
                continue
            tool = self.registry.get(proposal.tool_name)
            if self.door is not None:
                question = question_of(proposal, tool.pack if tool else "")
                ruling = await self.door(question, Step.LIST, actor=user)
                if ruling.outcome != "deny" and ruling.refusal is None:
                    waiting.append(proposal)
                continue
            policy = self.policies.for_proposal(
                proposal.tool_name, tool.pack if tool else "", proposal.policy
            )
            try:
                verdict = await may_approve(
                    policy, proposal.requester, user, self.groups, proposal.revised_by
                )
            except SlackApiError:
                continue
            if verdict.allowed:
                waiting.append(proposal)
        return waiting

    async def _listed(self, user: str, proposals: list[Proposal]) -> list[Listed]:
        """Each proposal with its card's link (Slack's permalink: a card in a thread opens
        there) and, where `user` may read the thread it came from, its title and link."""
        team_url = await self.team_url()
        async with self.db.transaction() as session:
            ids = [p.conversation_id for p in proposals if p.conversation_id is not None]
            titles = await proposal_queries.titles_of(session, ids)
            mine = await proposal_queries.taking_part(session, user, ids)
            copies = await proposal_queries.card_copies_of(session, [p.id for p in proposals])

        async def card_link(p: Proposal) -> str | None:
            """A link to the card `user` can open: their own copy if it was sent to them;
            none if the card lives only in other people's DMs (a link there would open
            nothing); else the card in its thread or channel."""
            own = [c for c in copies if c.proposal_id == p.id and c.recipient == user]
            where = (own[0].channel, own[0].ts) if own else (p.card_channel, p.card_ts)
            in_dms = {c.channel for c in copies if c.proposal_id == p.id}
            if not where[0] or not where[1] or (not own and where[0] in in_dms):
                return None
            try:
                found = await self.slack.chat_getPermalink(channel=where[0], message_ts=where[1])
            except SlackApiError:
                return None
            return str(found.get("permalink") or "") or None

        async def listed(p: Proposal) -> Listed:
            link = await card_link(p)
            # A DM is its own person's; a channel's thread is for who may read it now.
            readable = (
                p.conversation_id in mine
                if p.channel_id.startswith("D")
                else await self.access.can_read(p.channel_id, user)
            )
            if not readable or p.conversation_id is None:
                return Listed(p, link)
            thread = reply_link(team_url, p.channel_id, p.thread_ts or "")
            return Listed(p, link, titles.get(p.conversation_id), thread)

        return list(await asyncio.gather(*[listed(p) for p in proposals]))

    async def approvals_lists(self, team: str, user: str) -> tuple[list[Listed], list[Listed]]:
        waiting = await self._waiting_for(team, user)
        async with self.db.transaction() as session:
            recent = await proposal_queries.my_recent_proposals(session, team, user)
        recent = [p for p in recent if await self.access.may_read(user, p.audience)]
        return await self._listed(user, waiting[:20]), await self._listed(user, recent)

    async def approvals(self, team: str, user: str) -> list[dict[str, Any]]:
        waiting, recent = await self.approvals_lists(team, user)
        return views.as_dicts(approvals_view(waiting[:10], recent))

    # -- App Home ----------------------------------------------------------------------------
    async def publish_home(self, team: str, user: str) -> None:
        """Publish `user`'s Home tab, at the page of recent work they last turned to."""
        waiting, recent = await self.approvals_lists(team, user)
        async with self.db.transaction() as session:
            mine = await queries.my_conversations(
                session, team, user, self._home_pages.get(user, 0)
            )
        mine = await self.readable_titles(user, mine)
        held = grant_views.grant_blocks(await grant_views.live_for(self.db, team, user))
        usage = await self.usage.home(team, user) if self.usage is not None else []
        view = home_view(waiting, recent, mine, held, await self.team_url(), utcnow(), usage)
        try:
            await self.slack.views_publish(user_id=user, view=view)
        except SlackApiError as exc:
            log.warning("could not publish the home tab of %s: %s", user, exc)

    async def readable_titles(
        self, user: str, page: queries.Page[queries.ConversationRow]
    ) -> queries.Page[queries.ConversationRow]:
        """A title is the first request's words: shown only to who may still read where it
        was asked (someone who left a private channel sees that a conversation was there)."""
        rows = [
            row
            if await self.access.can_read(row.channel_id, user)
            else replace(row, title=None, reply_ts=None)
            for row in page.rows
        ]
        return replace(page, rows=rows)

    def refresh_home(self, team: str, user: str) -> None:
        if user in self._home_running:
            self._home_running[user] = True  # run once more when the current one ends
            return
        self._home_running[user] = False
        self.tasks.spawn(self._refresh_home(team, user), name=f"home-{user}")

    async def _refresh_home(self, team: str, user: str) -> None:
        try:
            while True:
                await self.publish_home(team, user)
                if not self._home_running.get(user):
                    return
                self._home_running[user] = False
        finally:
            self._home_running.pop(user, None)

    def proposal_changed(self, proposal: Proposal, approvers: list[str]) -> None:
        """Refresh the Home tab of everyone a proposal concerns (who has the tab open)."""
        tool = self.registry.get(proposal.tool_name)
        policy = self.policies.for_proposal(
            proposal.tool_name, tool.pack if tool else "", proposal.policy
        )
        people = {
            proposal.requester,
            *approvers,
            *(a for a in policy.approvers if not a.startswith("S")),
        }
        if proposal.decided_by:
            people.add(proposal.decided_by)
        for person in people & self._home_users:
            self.refresh_home(proposal.team_id, person)
