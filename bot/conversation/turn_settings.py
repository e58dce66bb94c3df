"""What a turn needs to know from the settings, read once by the composition root."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from bot.conversation.memory import Budget
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
    reply_in_threads: str = "mention"  # or "always"
    tool_timeout: float = 60.0
    proposal_expiry: timedelta = timedelta(minutes=15)
    links: LinkSigner | None = None
    budget: Budget = field(default_factory=Budget)
