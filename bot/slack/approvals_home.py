"""`/approvals` and the App Home: what waits for a person's decision (only what they may decide,
with a link to each card) and what they asked for or decided lately."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy import select

from bot.approvals.policy import GroupMembers, Policies, may_approve
from bot.approvals.questions import question_of
from bot.approvals.ruling import Authorise, Step
from bot.db.models import CardCopy, Proposal, utcnow
from bot.db.session import Database
from bot.records import queries
from bot.slack import grant_views
from bot.slack import record_views as views
from bot.slack.access import ChannelAccess
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
        self._team_url: str | None = None
        # People who opened the Home tab since this process started: only their tabs are
        # refreshed on changes (anyone else gets a fresh one when they open it), one refresh at
        # a time per person, coalescing bursts.
        self._home_users: set[str] = set()
        self._home_running: dict[str, bool] = {}
        # The one door: who may decide each waiting proposal (set by the app).
        self.door: Authorise | None = None
        # (channel, user): a person opened the bot's DM (suggested prompts; set by the app).
        self.on_messages_tab: Callable[[str, str], Awaitable[None]] | None = None

    async def team_url(self) -> str | None:
        if self._team_url is None:
            try:
                self._team_url = str((await self.slack.auth_test()).get("url") or "") or None
            except SlackApiError:
                return None
        return self._team_url

    # -- /approvals --------------------------------------------------------------------------
    async def _waiting_for(self, team: str, user: str) -> list[Proposal]:
        async with self.db.transaction() as session:
            only_own = None if self.policies.anyone_else_approves else user
            candidates = await queries.waiting_proposals(session, team, only_own)
            voted = await queries.voted_by(session, user)
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

    async def _with_links(
        self, proposals: list[Proposal], user: str
    ) -> list[tuple[Proposal, str | None]]:
        """Each proposal with a link to the card `user` can open: their own copy if it was
        sent to them; none if the card lives only in other people's DMs (a link there would
        open nothing); else the card in its thread or channel."""
        async with self.db.transaction() as session:
            ids = [p.id for p in proposals]
            copies = list(
                await session.scalars(select(CardCopy).where(CardCopy.proposal_id.in_(ids)))
            )

        async def link(p: Proposal) -> str | None:
            mine = [c for c in copies if c.proposal_id == p.id and c.recipient == user]
            where = (mine[0].channel, mine[0].ts) if mine else (p.card_channel, p.card_ts)
            in_dms = {c.channel for c in copies if c.proposal_id == p.id}
            if not where[0] or not where[1] or (not mine and where[0] in in_dms):
                return None
            try:
                found = await self.slack.chat_getPermalink(channel=where[0], message_ts=where[1])
            except SlackApiError:
                return None
            return str(found.get("permalink") or "") or None

        links = await asyncio.gather(*[link(p) for p in proposals])
        return list(zip(proposals, links, strict=True))

    async def approvals_lists(
        self, team: str, user: str
    ) -> tuple[list[tuple[Proposal, str | None]], list[tuple[Proposal, str | None]]]:
        waiting = (await self._waiting_for(team, user))[:10]
        async with self.db.transaction() as session:
            recent = await queries.my_recent_proposals(session, team, user)
        recent = [p for p in recent if await self.access.may_read(user, p.audience)]
        return await self._with_links(waiting, user), await self._with_links(recent, user)

    async def approvals(self, team: str, user: str) -> list[dict[str, Any]]:
        waiting, recent = await self.approvals_lists(team, user)
        return views.as_dicts(views.approvals_view(waiting, recent))

    # -- App Home ----------------------------------------------------------------------------
    async def publish_home(self, team: str, user: str) -> None:
        waiting, recent = await self.approvals_lists(team, user)
        async with self.db.transaction() as session:
            mine = await queries.my_conversations(session, team, user, 0)
        view = views.home_view(waiting, recent, mine, await self.team_url(), utcnow())
        held = grant_views.grant_blocks(await grant_views.live_for(self.db, team, user))
        room = 100 - len(view["blocks"])  # Slack's limit of blocks in a view
        if room > 2:
            view["blocks"][-1:-1] = held[:room]
        try:
            await self.slack.views_publish(user_id=user, view=view)
        except SlackApiError as exc:
            log.warning("could not publish the home tab of %s: %s", user, exc)

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
