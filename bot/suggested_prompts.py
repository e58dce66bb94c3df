"""The prompts Slack offers when a person opens the bot's DM (`SUGGESTED_PROMPTS`)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class SuggestedPrompt(BaseModel):
    """One prompt Slack offers when a person opens the bot's DM."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    title: Annotated[str, Field(min_length=1, max_length=75)]
    message: Annotated[str, Field(min_length=1, max_length=1000)]


# Each shows a kind of work: a plain question, a read tool, a write (with its approval card).
DEFAULT_PROMPTS = (
    SuggestedPrompt(
        title="What can you do?",
        message="What can you do for me here, and which of it needs someone's approval?",
    ),
    SuggestedPrompt(title="What's on the board?", message="List the open tasks on the board."),
    SuggestedPrompt(
        title="Create a task",
        message="Create a task for me to review the release notes, due Friday.",
    ),
    SuggestedPrompt(
        title="Catch me up on a channel",
        message="Summarise the latest messages in a channel I'll name.",
    ),
)
