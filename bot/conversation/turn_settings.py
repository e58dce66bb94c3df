"""What a turn needs to know from the settings, read once by the composition root."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from bot.config import Settings
from bot.conversation.memory import Budget
from bot.files.parts import Vision
from bot.links import LinkSigner


@dataclass(frozen=True)
class TurnSettings:
    system_prompt: str
    history_window: int
    max_chars: int
    min_edit_interval: float
    streaming: str = "edit"  # auto | native | edit
    min_append_interval: float = 0.5
    max_tool_rounds: int = 8
    max_tool_calls_per_round: int = 8
    thread_import_messages: int = 50
    history_tier: int = 3  # SLACK_HISTORY_TIER: Slack's tier for conversations.replies
    thread_followups: str = "on"  # or "mention" (`bot.conversation.addressing`)
    tool_timeout: float = 60.0
    proposal_expiry: timedelta = timedelta(minutes=15)
    links: LinkSigner | None = None
    budget: Budget = field(default_factory=Budget)
    vision: Vision = field(default_factory=Vision)  # VISION, and models that refused images
    file_tokens: int = 2_000  # a shared file's text is cut to this share

    @classmethod
    def from_settings(cls, settings: Settings, links: LinkSigner | None) -> TurnSettings:
        return cls(
            system_prompt=settings.system_prompt,
            history_window=settings.history_window_messages,
            max_chars=settings.slack_message_max_chars,
            min_edit_interval=settings.slack_edit_min_interval_seconds,
            streaming=settings.streaming,
            min_append_interval=settings.slack_append_min_interval_seconds,
            max_tool_rounds=settings.max_tool_rounds,
            max_tool_calls_per_round=settings.max_tool_calls_per_round,
            thread_import_messages=settings.thread_import_messages,
            history_tier=settings.slack_history_tier,
            thread_followups=settings.thread_followups,
            tool_timeout=settings.tool_timeout_seconds,
            proposal_expiry=timedelta(minutes=settings.proposal_expiry_minutes),
            links=links,
            vision=Vision(settings.vision),
            file_tokens=settings.tool_result_tokens,
            budget=Budget(
                total=settings.token_budget,
                reply=settings.reply_tokens,
                tool_result=settings.tool_result_tokens,
                summary=settings.summary_tokens,
            ),
        )
