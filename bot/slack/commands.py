"""/history and /approvals, their buttons, and the App Home.

Commands are acknowledged at once (Slack's 3-second rule) and answered ephemerally through the
command's `response_url`. Every answer is computed for the person asking, and every button is
checked again against the person who clicked it: a button's value is never trusted.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncRespond
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.approvals.policy import GroupMembers, Policies, may_approve
from bot.db.models import Conversation, Proposal, utcnow
from bot.db.session import Database
from bot.records import queries
from bot.records.retention import forget_user
from bot.slack import record_views as views
from bot.slack.access import ChannelAccess
from bot.slack.cards import clip, safe
from bot.tasks import TaskGroup
from bot.tools.registry import ToolRegistry

log = logging.getLogger(__name__)

LINK = re.compile(r"/archives/([CDG][A-Z0-9]+)/p(\d{10})(\d{6})(?:\?[^>\s]*?thread_ts=(\d+\.\d+))?")
HELP = (
    "`/history` lists your conversations · `/history <link to a thread>` shows one · "
    "`/history search <words>` finds your messages · `/history forget` deletes the "
    "conversations you started"
)


def parse_thread_link(text: str) -> tuple[str, str] | None:
    """(channel, ts) of a Slack message link, preferring the thread's root when given."""
    found = LINK.search(text)
    if not found:
        return None
    channel, seconds, micros, thread_ts = found.groups()
    return channel, thread_ts or f"{seconds}.{micros}"


class Records:
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

    async def team_url(self) -> str | None:
        if self._team_url is None:
            try:
                self._team_url = str((await self.slack.auth_test()).get("url") or "") or None
            except SlackApiError:
                return None
        return self._team_url

    # -- /history ----------------------------------------------------------------------------
    async def history(self, team: str, user: str, text: str) -> list[dict[str, Any]]:
        text = text.strip()
        if not text:
            return await self.conversation_page(team, user, 0)
        if text.lower() == "forget":
            return views.as_dicts(views.forget_prompt())
        if text.lower().startswith("search"):
            words = text[len("search") :].strip()
            if not words:
                return _note("Give some words to look for: `/history search deploy`.")
            async with self.db.transaction() as session:
                hits = await queries.search_my_messages(session, team, user, words)
            return views.as_dicts(views.search_results(words, hits, await self.team_url()))
        link = parse_thread_link(text)
        if link is None:
            return _note(HELP)
        async with self.db.transaction() as session:
            conversation = await queries.visible_conversation(session, team, user, *link)
        if conversation is None:
            return _note("There is no conversation of yours in that thread.")
        return await self.conversation_detail(user, conversation.id, 0) or _note(
            "That conversation is not one you can see."
        )

    async def conversation_page(self, team: str, user: str, page: int) -> list[dict[str, Any]]:
        async with self.db.transaction() as session:
            rows = await queries.my_conversations(session, team, user, max(0, page))
        return views.as_dicts(views.conversation_list(rows, await self.team_url()))

    async def conversation_detail(
        self, user: str, conversation_id: int, page: int
    ) -> list[dict[str, Any]] | None:
        async with self.db.transaction() as session:
            conversation = await queries.visible_conversation_by_id(session, user, conversation_id)
            if conversation is None:
                return None
            messages = await queries.conversation_messages(session, conversation.id, max(0, page))
            proposals = await queries.conversation_proposals(session, conversation.id)
            hidden = await queries.private_to_others(session, conversation.id, user)
        if not await self.access.can_read(conversation.channel_id, user):
            return None
        return views.as_dicts(
            views.conversation_detail(
                conversation.channel_id,
                conversation.thread_ts,
                await self.team_url(),
                messages,
                proposals,
                conversation.id,
                hidden,
            )
        )

    async def full_text(self, user: str, message_id: int) -> list[dict[str, Any]]:
        async with self.db.transaction() as session:
            message = await queries.visible_message(session, user, message_id)
            conversation = (
                await session.get(Conversation, message.conversation_id) if message else None
            )
        if (
            message is None
            or conversation is None
            or not await self.access.can_read(conversation.channel_id, user)
        ):
            return _note("That message is not one you can see.")
        body = safe(message.content, 11_800)
        return [
            {"type": "section", "text": {"type": "mrkdwn", "text": body[i : i + 2900]}}
            for i in range(0, len(body), 2900)
        ][:4] or _note("(empty)")

    # -- /approvals --------------------------------------------------------------------------
    async def _waiting_for(self, team: str, user: str) -> list[Proposal]:
        async with self.db.transaction() as session:
            only_own = None if self.policies.anyone_else_approves else user
            candidates = await queries.waiting_proposals(session, team, only_own)
            voted = await queries.voted_by(session, user)
        waiting = []
        for proposal in candidates:
            if proposal.id in voted:
                continue
            tool = self.registry.get(proposal.tool_name)
            policy = self.policies.for_tool(proposal.tool_name, tool.pack if tool else "")
            try:
                verdict = await may_approve(policy, proposal.requester, user, self.groups)
            except SlackApiError:
                continue
            if verdict.allowed:
                waiting.append(proposal)
        return waiting

    async def _with_links(self, proposals: list[Proposal]) -> list[tuple[Proposal, str | None]]:
        async def link(p: Proposal) -> str | None:
            if not p.card_channel or not p.card_ts:
                return None
            try:
                found = await self.slack.chat_getPermalink(
                    channel=p.card_channel, message_ts=p.card_ts
                )
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
        return await self._with_links(waiting), await self._with_links(recent)

    async def approvals(self, team: str, user: str) -> list[dict[str, Any]]:
        waiting, recent = await self.approvals_lists(team, user)
        return views.as_dicts(views.approvals_view(waiting, recent))

    # -- App Home ----------------------------------------------------------------------------
    async def publish_home(self, team: str, user: str) -> None:
        waiting, recent = await self.approvals_lists(team, user)
        async with self.db.transaction() as session:
            mine = await queries.my_conversations(session, team, user, 0)
        view = views.home_view(waiting, recent, mine, await self.team_url(), utcnow())
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
        policy = self.policies.for_tool(proposal.tool_name, tool.pack if tool else "")
        people = {
            proposal.requester,
            *approvers,
            *(a for a in policy.approvers if not a.startswith("S")),
        }
        if proposal.decided_by:
            people.add(proposal.decided_by)
        for person in people & self._home_users:
            self.refresh_home(proposal.team_id, person)

    # -- wiring ------------------------------------------------------------------------------
    def register(self, app: AsyncApp) -> None:
        @app.command("/history")
        async def history(ack: AsyncAck, command: dict[str, str], respond: AsyncRespond) -> None:
            await ack()
            blocks = await self.history(
                command["team_id"], command["user_id"], command.get("text", "")
            )
            await respond(response_type="ephemeral", text="Your history", blocks=blocks)

        @app.command("/approvals")
        async def approvals(ack: AsyncAck, command: dict[str, str], respond: AsyncRespond) -> None:
            await ack()
            blocks = await self.approvals(command["team_id"], command["user_id"])
            await respond(response_type="ephemeral", text="Your approvals", blocks=blocks)

        async def page(ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond) -> None:
            await ack()
            value = json.loads(body["actions"][0]["value"])
            blocks = await self.conversation_page(
                _team(body), body["user"]["id"], int(value["page"])
            )
            await respond(replace_original=True, text="Your history", blocks=blocks)

        async def thread_page(ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond) -> None:
            await ack()
            value = json.loads(body["actions"][0]["value"])
            blocks = await self.conversation_detail(
                body["user"]["id"], int(value["x"]), int(value["page"])
            )
            await respond(
                replace_original=True,
                text="Your history",
                blocks=blocks or _note("That conversation is not one you can see."),
            )

        async def open_conversation(
            ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond
        ) -> None:
            await ack()
            blocks = await self.conversation_detail(
                body["user"]["id"], int(body["actions"][0]["value"]), 0
            )
            await respond(
                replace_original=True,
                text="Your history",
                blocks=blocks or _note("That conversation is not one you can see."),
            )

        async def full_text(ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond) -> None:
            await ack()
            blocks = await self.full_text(body["user"]["id"], int(body["actions"][0]["value"]))
            await respond(
                replace_original=False, response_type="ephemeral", text="Full text", blocks=blocks
            )

        async def forget(ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond) -> None:
            await ack()
            removed = await forget_user(self.db, _team(body), body["user"]["id"])
            await respond(
                replace_original=True,
                text=(
                    f"Deleted {removed.conversations} conversation(s) only you took part in and "
                    f"{removed.messages} message(s) of yours in threads shared with others. "
                    f"{removed.proposals_redacted} action(s) keep a redacted audit record."
                ),
            )

        app.action(f"{views.HISTORY_PAGE}_prev")(page)
        app.action(f"{views.HISTORY_PAGE}_next")(page)
        app.action(f"{views.HISTORY_THREAD_PAGE}_prev")(thread_page)
        app.action(f"{views.HISTORY_THREAD_PAGE}_next")(thread_page)
        app.action(views.HISTORY_OPEN)(open_conversation)
        app.action(views.HISTORY_FULL)(full_text)
        app.action(views.HISTORY_FORGET)(forget)

        @app.event("app_home_opened")
        async def home_opened(event: dict[str, Any], body: dict[str, Any]) -> None:
            if event.get("tab", "home") == "home":
                self._home_users.add(str(event["user"]))
                self.refresh_home(str(body.get("team_id")), str(event["user"]))


def _team(body: dict[str, Any]) -> str:
    return str((body.get("team") or {}).get("id") or body.get("user", {}).get("team_id") or "")


def _note(text: str) -> list[dict[str, Any]]:
    return [{"type": "section", "text": {"type": "mrkdwn", "text": clip(text, 2900)}}]
