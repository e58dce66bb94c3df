"""The DM as an agent: suggested prompts when a person opens it, and a title for each DM thread
taken from its first question (`assistant.threads.setSuggestedPrompts` / `setTitle`, Tier 3).

Prompts are set at most once an hour per person (Slack sends `app_home_opened` each time the
DM is opened). What the workspace refuses is learned once and not asked again; neither call
ever fails a turn.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable, Sequence
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.errors import slack_error
from bot.slack.agent_status import UNSUPPORTED
from bot.slack.call_budgets import BUDGET_SPENT
from bot.suggested_prompts import SuggestedPrompt

log = logging.getLogger(__name__)

PROMPTS_EVERY_SECONDS = 3600.0
TITLE_MAX = 60
_MENTION = re.compile(r"<[@#!][^>]*>")


def thread_title(question: str) -> str:
    """A short title from a question: its first line, without mentions, cut at a word."""
    line = next((ln for ln in _MENTION.sub("", question).splitlines() if ln.strip()), "")
    line = " ".join(line.split())
    if len(line) <= TITLE_MAX:
        return line
    cut = line.rfind(" ", 0, TITLE_MAX - 1)
    return line[: cut if cut > TITLE_MAX // 2 else TITLE_MAX - 1].rstrip() + "…"


class AgentThreads:
    def __init__(self, client: AsyncWebClient, prompts: Sequence[SuggestedPrompt]) -> None:
        self.client = client
        self.prompts = [p.model_dump() for p in prompts]
        self._prompted: dict[str, float] = {}  # user -> when their prompts were last set
        self._off: set[str] = set()  # methods this workspace refused for good

    async def opened(self, channel: str, user: str) -> None:
        """A person opened the bot's DM: offer the configured prompts."""
        if not self.prompts or not channel or "prompts" in self._off:
            return
        now = time.monotonic()
        if now - self._prompted.get(user, -PROMPTS_EVERY_SECONDS) < PROMPTS_EVERY_SECONDS:
            return
        self._prompted[user] = now
        if not await self._call(
            "prompts",
            self.client.assistant_threads_setSuggestedPrompts(
                channel_id=channel, prompts=self.prompts, title="Try asking"
            ),
        ):
            self._prompted.pop(user, None)

    async def started(self, channel: str, thread_ts: str) -> None:
        """A person started a new assistant thread (`assistant_thread_started`): offer the
        prompts in it. Each thread is new, so no hourly limit."""
        if not self.prompts or "prompts" in self._off:
            return
        await self._call(
            "prompts",
            self.client.assistant_threads_setSuggestedPrompts(
                channel_id=channel, thread_ts=thread_ts, prompts=self.prompts, title="Try asking"
            ),
        )

    async def title(self, channel: str, thread_ts: str | None, title: str) -> None:
        """Name a DM thread (`bot.conversation.titles` made the title, plain words)."""
        if not thread_ts or not title or "title" in self._off:
            return
        await self._call(
            "title",
            self.client.assistant_threads_setTitle(
                channel_id=channel, thread_ts=thread_ts, title=title
            ),
        )

    async def _call(self, what: str, call: Awaitable[Any]) -> bool:
        try:
            await call
            return True
        except SlackApiError as exc:
            if slack_error(exc) == BUDGET_SPENT:
                log.info("assistant %s skipped: its budget is spent", what)
            elif slack_error(exc) in UNSUPPORTED:
                log.info("assistant %s unavailable (%s): not asked again", what, slack_error(exc))
                self._off.add(what)
            else:
                log.warning("could not set the assistant %s: %s", what, slack_error(exc))
        except Exception as exc:  # the network: try again next time
            log.warning("could not set the assistant %s: %s", what, type(exc).__name__)
        return False
