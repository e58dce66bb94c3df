"""/history, /approvals and /usage, their buttons, and the App Home.

Commands are acknowledged at once (Slack's 3-second rule) and answered ephemerally through the
command's `response_url`. Every answer is computed for the person asking, and every button is
checked again against the person who clicked it: a button's value is never trusted.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncRespond

from bot.db.models import Conversation
from bot.records import feedback, queries
from bot.records.retention import forget_user
from bot.records.usage_queries import turn_usage
from bot.slack import grant_views
from bot.slack import record_views as views
from bot.slack.approvals_home import ApprovalsAndHome
from bot.slack.cards import clip, safe
from bot.slack.home_view import HOME_PAGE, OPEN_CARD
from bot.slack.payloads import BadPayload, button_json, button_value, clicker, whole_number
from bot.slack.usage_view import NO_LIMITS

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


class Records(ApprovalsAndHome):
    """`/history` and its buttons; `/approvals` and the App Home come from the base class."""

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
        rows = await self.readable_titles(user, rows)
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
            votes = await feedback.tallies(session, [m.id for m in messages.rows])
            turns = await turn_usage(session, conversation.id)
        if not await self.access.can_read(conversation.channel_id, user):
            return None
        for message in messages.rows:  # data of an audience the viewer may not read
            if not await self.access.may_read(user, message.audience):
                hidden.add(message.id)
        proposals = [p for p in proposals if await self.access.may_read(user, p.audience)]
        return views.as_dicts(
            views.conversation_detail(
                conversation.channel_id,
                conversation.thread_ts,
                conversation.title,
                await self.team_url(),
                messages,
                proposals,
                conversation.id,
                hidden,
                votes,
                self.usage.words if self.usage is not None else None,
                turns,
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
            or not await self.access.may_read(user, message.audience)
        ):
            return _note("That message is not one you can see.")
        body = safe(message.content, 11_800)
        return [
            {"type": "section", "text": {"type": "mrkdwn", "text": body[i : i + 2900]}}
            for i in range(0, len(body), 2900)
        ][:4] or _note("(empty)")

    async def _home_page(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        """Next / Previous in the App Home: the clicker's own Home, at the page asked for
        (the only thing taken from the button; a crafted value changes nothing)."""
        await ack()
        try:
            user, page = clicker(body), whole_number(button_json(body).get("page"))
        except BadPayload as exc:
            log.info("refused a crafted home page button: %s", exc)
            return
        self._home_users.add(user)
        self._home_pages[user] = min(page, 1000)
        self.refresh_home(_team(body), user)

    # -- wiring ------------------------------------------------------------------------------
    def _acked_then_run(self, handler: Handler) -> Handler:
        """Acknowledge at once and answer from a tracked task through `respond`: Bolt then
        answers Slack as soon as the listener returns (the app processes before responding, so
        no ack waits on Bolt's 10 ms polling), and the answer is still drained on shutdown."""

        async def listener(ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond) -> None:
            await ack()
            self.tasks.spawn(handler(_acked, body, respond), name="records")  # type: ignore[arg-type]

        return listener

    def register(self, app: AsyncApp) -> None:
        async def history(ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond) -> None:
            await ack()
            blocks = await self.history(body["team_id"], body["user_id"], body.get("text", ""))
            await respond(response_type="ephemeral", text="Your history", blocks=blocks)

        async def approvals(ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond) -> None:
            await ack()
            team, user = body["team_id"], body["user_id"]
            if body.get("text", "").strip().lower() == "grants":
                rows = await grant_views.live_for(self.db, team, user)
                blocks = grant_views.grant_blocks(rows)
                await respond(response_type="ephemeral", text="Your grants", blocks=blocks)
                return
            blocks = await self.approvals(team, user)
            await respond(response_type="ephemeral", text="Your approvals", blocks=blocks)

        async def usage(ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond) -> None:
            await ack()
            blocks = (
                await self.usage.command(
                    body["team_id"], body.get("channel_id", ""), body["user_id"]
                )
                if self.usage is not None
                else _note(NO_LIMITS)
            )
            await respond(response_type="ephemeral", text="Your usage", blocks=blocks)

        async def page(ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond) -> None:
            await ack()
            value = button_json(body)
            blocks = await self.conversation_page(
                _team(body), clicker(body), whole_number(value.get("page"))
            )
            await respond(replace_original=True, text="Your history", blocks=blocks)

        async def thread_page(ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond) -> None:
            await ack()
            value = button_json(body)
            blocks = await self.conversation_detail(
                clicker(body), whole_number(value.get("x")), whole_number(value.get("page"))
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
                clicker(body), whole_number(button_value(body)), 0
            )
            await respond(
                replace_original=True,
                text="Your history",
                blocks=blocks or _note("That conversation is not one you can see."),
            )

        async def full_text(ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond) -> None:
            await ack()
            blocks = await self.full_text(clicker(body), whole_number(button_value(body)))
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

        later = self._acked_then_run
        app.command("/history")(later(history))
        app.command("/approvals")(later(approvals))
        app.command("/usage")(later(usage))
        app.action(f"{views.HISTORY_PAGE}_prev")(later(_guarded(page)))
        app.action(f"{views.HISTORY_PAGE}_next")(later(_guarded(page)))
        app.action(f"{views.HISTORY_THREAD_PAGE}_prev")(later(_guarded(thread_page)))
        app.action(f"{views.HISTORY_THREAD_PAGE}_next")(later(_guarded(thread_page)))
        app.action(views.HISTORY_OPEN)(later(_guarded(open_conversation)))
        app.action(views.HISTORY_FULL)(later(_guarded(full_text)))
        app.action(views.HISTORY_FORGET)(later(forget))
        app.action(grant_views.REVOKE)(later(grant_views.revoke_button(self.db, self.refresh_home)))
        app.action(f"{HOME_PAGE}_prev")(self._home_page)
        app.action(f"{HOME_PAGE}_next")(self._home_page)

        @app.action(OPEN_CARD)
        async def open_card(ack: AsyncAck) -> None:
            await ack()  # a link button: Slack opens the card, the click needs only its ack

        @app.event("app_home_opened")
        async def home_opened(event: dict[str, Any], body: dict[str, Any]) -> None:
            if event.get("tab", "home") == "home":
                self._home_users.add(str(event["user"]))
                self.refresh_home(str(body.get("team_id")), str(event["user"]))
            elif event.get("tab") == "messages" and self.on_messages_tab is not None:
                await self.on_messages_tab(str(event.get("channel") or ""), str(event["user"]))


Handler = Callable[[AsyncAck, dict[str, Any], AsyncRespond], Awaitable[None]]


async def _acked(**_: Any) -> None:
    """Stands in for `ack` once the request was acknowledged."""


def _guarded(handler: Handler) -> Handler:
    """A crafted button changes nothing and its clicker is told so, privately."""

    async def guarded(ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond) -> None:
        try:
            await handler(ack, body, respond)
        except BadPayload as exc:
            log.info("refused a crafted /history button: %s", exc)
            await respond(
                replace_original=False,
                response_type="ephemeral",
                text="That button was not made by Countersign, so nothing changed.",
            )

    return guarded


def _team(body: dict[str, Any]) -> str:
    return str((body.get("team") or {}).get("id") or body.get("user", {}).get("team_id") or "")


def _note(text: str) -> list[dict[str, Any]]:
    return [{"type": "section", "text": {"type": "mrkdwn", "text": clip(text, 2900)}}]
