"""How the bot takes part in channel threads (`THREAD_FOLLOWUPS`), and the older setting it
replaces (`REPLY_IN_THREADS`), kept working as a deprecated alias."""

from __future__ import annotations

import logging
from typing import Any, Literal, Self

from pydantic import field_validator, model_validator
from pydantic_settings import BaseSettings

log = logging.getLogger(__name__)

Followups = Literal["on", "mention"]


class ThreadSettings(BaseSettings):
    # In a channel thread the bot answered in: `on`, later messages continue the conversation
    # without a mention (not those addressed to someone else); `mention`, only mentions.
    thread_followups: Followups = "on"
    # Deprecated, read as THREAD_FOLLOWUPS: `mention` -> mention, `always` -> on.
    reply_in_threads: Literal["mention", "always"] | None = None

    @field_validator("thread_followups", "reply_in_threads", mode="before")
    @classmethod
    def _lower_word(cls, v: Any) -> Any:
        return v.strip().lower() if isinstance(v, str) else v

    @model_validator(mode="after")
    def _followups_alias(self) -> Self:
        """REPLY_IN_THREADS still works, with a warning; set beside a THREAD_FOLLOWUPS that
        says otherwise, it is an error rather than a silent pick."""
        if self.reply_in_threads is None:
            return self
        meant: Followups = "on" if self.reply_in_threads == "always" else "mention"
        if "thread_followups" in self.model_fields_set and self.thread_followups != meant:
            raise ValueError(
                f"REPLY_IN_THREADS={self.reply_in_threads} disagrees with THREAD_FOLLOWUPS="
                f"{self.thread_followups}: REPLY_IN_THREADS is replaced by THREAD_FOLLOWUPS, "
                "remove it"
            )
        log.warning("REPLY_IN_THREADS is deprecated: set THREAD_FOLLOWUPS=%s instead", meant)
        self.thread_followups = meant
        return self
