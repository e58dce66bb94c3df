"""The thread's agent status: `processing` while a turn works, `suspended` while its proposals
wait for people, `active` when it is done.

Agent sessions (`agents.sessions.setStatus`, whose status is an enum; Slack shows a native Stop
button while a session is `processing`) where the workspace offers them; else the older
`assistant.threads.setStatus` (free text, cleared with an empty string); else nothing. What the
workspace refuses is learned once and not asked again; a status never fails a turn.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Literal

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.errors import slack_error

log = logging.getLogger(__name__)

Status = Literal["processing", "suspended", "active"]

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

    async def set(self, channel: str, thread_ts: str | None, status: Status, user: str) -> None:
        if not thread_ts:
            return
        with contextlib.suppress(Exception):
            await self._set(channel, thread_ts, status, user)

    async def _set(self, channel: str, thread_ts: str, status: Status, user: str) -> None:
        if self.surface == "sessions":
            try:
                await self.client.agents_sessions_setStatus(
                    channel_id=channel, thread_ts=thread_ts, status=status, initiator_user_id=user
                )
                return
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
            except SlackApiError as exc:
                if slack_error(exc) not in UNSUPPORTED:
                    raise
                log.info("assistant status unavailable (%s): no thread status", slack_error(exc))
                self.surface = "none"
