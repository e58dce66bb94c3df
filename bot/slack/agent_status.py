"""The thread's agent status: `processing` while a turn works, `suspended` while its proposals
wait for people, `active` when it is done.

Agent sessions (`agents.sessions.setStatus`, whose status is an enum; Slack shows a native Stop
button while a session is `processing`) where the workspace offers them; else the older
`assistant.threads.setStatus` (free text, cleared with an empty string); else nothing. What the
workspace refuses is learned once and not asked again; a status never fails a turn.

A status is cosmetic (Tier 3, about 50 a minute for the workspace): when its budget is spent it
is skipped, not queued (`bot/slack/call_budgets.py`), and the latest status wins. A `processing`
leaves a slot free for the end of every thread this process shows `processing` (so the
`active` or `suspended` that ends it always has room and no thread stays stuck on
`processing`); the end of a thread whose `processing` was skipped is sent only if the thread
shows something else and a slot beyond those is free; a status the thread already shows is not
sent again.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Literal

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.errors import slack_error
from bot.slack.call_budgets import BUDGET_SPENT, asking

log = logging.getLogger(__name__)

Status = Literal["processing", "suspended", "active"]
# set: Slack has it; unchanged: the thread already showed it; skipped: its budget was spent;
# failed: Slack refused it or did not answer; off: the workspace has no thread status.
Outcome = Literal["set", "unchanged", "skipped", "failed", "off"]
REMEMBERED_THREADS = 10_000
OWED_FOR_SECONDS = 900.0  # longer than any turn works between two statuses

# Answers meaning "this workspace or app cannot use that method": stop asking.
UNSUPPORTED = frozenset(
    {
        "feature_not_enabled",
        "unknown_method",
        "not_allowed_token_type",
        "missing_scope",
        "not_allowed",
        "invalid_arguments",
        "method_deprecated",
    }
)

ASSISTANT_TEXT = {"processing": "is working on it…", "suspended": "", "active": ""}


class AgentStatus:
    def __init__(self, client: AsyncWebClient) -> None:
        self.client = client
        self.surface: Literal["sessions", "assistant", "none"] = "sessions"
        # What each thread shows, as far as this process set it; the threads shown
        # `processing` are owed their end.
        self._shown: OrderedDict[tuple[str, str], Status] = OrderedDict()
        # thread -> when its `processing` was asked for
        self._owed: dict[tuple[str, str], float] = {}

    async def set(self, channel: str, thread_ts: str | None, status: Status, user: str) -> Outcome:
        if not thread_ts:
            return "off"
        key = (channel, thread_ts)
        if self._shown.get(key) == status:
            return "unchanged"
        owed = key in self._owed
        keep_free: int | Callable[[], int]
        if status == "processing":
            # Its end is owed a slot from now on: a `processing` leaves one free for each
            # thread it (or any other) will have to end, counted when it takes its own.
            self._owed[key] = time.monotonic()
            keep_free = self._reserve
        elif owed:
            keep_free = 0  # ends a `processing`: takes the slot kept for it
        else:
            keep_free = self._reserve  # nothing of ours to end: only spare room
        outcome = await self._attempt(channel, thread_ts, status, user, keep_free)
        if outcome == "set":
            self._shown[key] = status
            self._shown.move_to_end(key)
            while len(self._shown) > REMEMBERED_THREADS:
                self._owed.pop(self._shown.popitem(last=False)[0], None)
            if status != "processing":
                self._owed.pop(key, None)
        elif status == "processing" and not owed:
            self._owed.pop(key, None)  # it does not show `processing`: nothing to end
        return outcome

    def _reserve(self) -> int:
        """Slots kept for the ends owed. A turn that never ended its `processing` (it crashed)
        stops being owed one after `OWED_FOR_SECONDS`, so the reserve cannot grow for good."""
        stale = time.monotonic() - OWED_FOR_SECONDS
        for key in [k for k, at in self._owed.items() if at < stale]:
            del self._owed[key]
        return len(self._owed)

    async def _attempt(
        self,
        channel: str,
        thread_ts: str,
        status: Status,
        user: str,
        keep_free: int | Callable[[], int],
    ) -> Outcome:
        try:
            with asking(keep_free=keep_free):
                return await self._set(channel, thread_ts, status, user)
        except SlackApiError as exc:
            if slack_error(exc) == BUDGET_SPENT:
                log.debug("thread status %s skipped: its budget is spent", status)
                return "skipped"
            log.info("could not set the thread status: %s", slack_error(exc))
        except Exception as exc:  # the network: a status never fails a turn
            log.info("could not set the thread status: %s", type(exc).__name__)
        return "failed"

    async def _set(self, channel: str, thread_ts: str, status: Status, user: str) -> Outcome:
        if self.surface == "sessions":
            try:
                await self.client.agents_sessions_setStatus(
                    channel_id=channel, thread_ts=thread_ts, status=status, initiator_user_id=user
                )
                return "set"
            except SlackApiError as exc:
                if slack_error(exc) not in UNSUPPORTED:
                    raise
                log.info(
                    "agent sessions unavailable (%s): using assistant status", slack_error(exc)
                )
                self.surface = "assistant"
        if self.surface == "assistant":
            try:
                await self.client.assistant_threads_setStatus(
                    channel_id=channel, thread_ts=thread_ts, status=ASSISTANT_TEXT[status]
                )
                return "set"
            except SlackApiError as exc:
                if slack_error(exc) not in UNSUPPORTED:
                    raise
                log.info("assistant status unavailable (%s): no thread status", slack_error(exc))
                self.surface = "none"
        return "off"
