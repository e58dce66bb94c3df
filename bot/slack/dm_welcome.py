"""The DM welcomes: when a person opens the bot's DM (the Messages tab, `app_home_opened`) or
starts an assistant thread (`assistant_thread_started`), the bot posts its welcome there once
per person (`bot.welcome_text`: what it can do and what needs whose approval), then offers the
suggested prompts (`AgentThreads`).

Once means once: the person's row (`bot.db.welcomes`) is claimed before the post, so a second
open, a second replica or a restart finds it; a post Slack refused releases it, to be tried at
the next open. A post whose answer was lost is looked for before it is tried again (the
poster posts once under a key); one that still cannot be told may have been posted, so it is not
released: a welcome may be missed but is never posted twice. Nothing here ever fails the event."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.db.session import Database
from bot.db.welcomes import claim_welcome, release_welcome
from bot.membership import reach_of
from bot.poster import NOTHING_PRIVATE, PostRefused, poster_of
from bot.slack.agent_threads import AgentThreads
from bot.tasks import TaskGroup

log = logging.getLogger(__name__)

DM_ID = re.compile(r"D[A-Z0-9]{1,31}")
USER_ID = re.compile(r"[UW][A-Z0-9]{1,31}")
KNOWN_MAX = 50_000  # people remembered as welcomed in this process (beyond: the database)


def refused(exc: Exception) -> bool:
    """Whether nothing was posted: Slack answered with its own error, or the poster refused."""
    if isinstance(exc, PostRefused):
        return True
    data = getattr(exc.response, "data", None) if isinstance(exc, SlackApiError) else None
    return isinstance(data, dict) and bool(data.get("error"))


class DmWelcome:
    def __init__(
        self,
        db: Database,
        slack: AsyncWebClient,
        threads: AgentThreads,
        text_for: Callable[[str], str],
        tasks: TaskGroup,
    ) -> None:
        """`text_for(user)`: the welcome for that person, made at the time it is posted (the
        tools and the policy in force then)."""
        self.db = db
        self.slack = slack
        self.threads = threads
        self.text_for = text_for
        self.tasks = tasks
        self._known: set[str] = set()  # users welcomed already (saves a database write)

    async def messages_tab(self, channel: str, user: str) -> None:
        """The person opened the DM's Messages tab: the welcome in the DM, then prompts (in
        a task of their own: the event is acknowledged at once)."""
        self.tasks.spawn(self._opened(channel, user), name=f"welcome-{user}")

    def thread_started(self, channel: str, thread_ts: str, user: str) -> None:
        """The person started an assistant thread: the welcome in it, then its prompts."""
        self.tasks.spawn(self._started(channel, thread_ts, user), name=f"welcome-{user}")

    async def _opened(self, channel: str, user: str) -> None:
        await self.welcome(channel, None, user)
        await self.threads.opened(channel, user)

    async def _started(self, channel: str, thread_ts: str, user: str) -> None:
        await self.welcome(channel, thread_ts, user)
        await self.threads.started(channel, thread_ts)

    async def welcome(self, channel: str, thread_ts: str | None, user: str) -> None:
        if not (DM_ID.fullmatch(channel) and USER_ID.fullmatch(user)) or user in self._known:
            return  # only a DM with the bot is the person's own; junk is not a person
        try:
            team = await reach_of(self.slack).workspace() or ""
            claimed = await claim_welcome(self.db, team, user)
        except Exception as exc:  # Slack or the database: try at the next open
            log.warning("could not check the welcome of a person: %s", type(exc).__name__)
            return
        if len(self._known) < KNOWN_MAX:
            self._known.add(user)
        if not claimed:
            return
        try:
            await poster_of(self.slack).post(
                channel,
                self.text_for(user),
                carries=NOTHING_PRIVATE,
                thread_ts=thread_ts,
                reader=user,
            )
        except Exception as exc:
            log.warning("could not post the welcome: %s", type(exc).__name__)
            if not refused(exc):
                return  # it may be in the DM: at most once, so the claim stays
            self._known.discard(user)
            try:
                await release_welcome(self.db, team, user)
            except Exception as again:
                log.warning("could not release the welcome: %s", type(again).__name__)
