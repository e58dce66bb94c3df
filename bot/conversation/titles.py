"""A short title for each conversation, from its first request.

The first words are stored at once; where a title model is configured, a cheap call in the
background replaces them with its own few words. The call never delays or fails the reply:
it runs apart from the turn, has a short timeout, and whatever it returns is reduced to plain
words (no mentions, no markup, no line breaks, clipped) before it is stored. In a DM thread the
title is also set as the agent thread's title, once, when it is final.
"""

from __future__ import annotations

import asyncio
import logging
import re

from openai.types.chat import ChatCompletionMessageParam

from bot.conversation.spending import SpendGate
from bot.db.session import Database
from bot.db.turn_writes import SET_TITLE, Title
from bot.llm import LLM, LLMError
from bot.slack.agent_threads import AgentThreads, thread_title
from bot.tasks import TaskGroup

log = logging.getLogger(__name__)

TITLE_TOKENS = 24
QUESTION_CHARS = 1_000  # of the first request, what the title model reads
INSTRUCTION = (
    "Write a title of at most 6 words for a conversation that starts with the request below. "
    "Answer with the title only: no quotes, no punctuation at the end, no mentions."
)
# Anything Slack would read as markup that could reach somebody: <@U…>, <!here>, <#C…>,
# and the bare words a reader might mistake for one.
_CHANNEL = re.compile(r"<#[CG][A-Z0-9]+\|([^<>|]*)>")  # a channel mention reads "#name"
_ANGLED = re.compile(r"<[^>]*>?")
_BROADCAST = re.compile(r"@(here|channel|everyone)\b", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u200b-\u200f\u2028-\u202e\u2060-\u2064\ufeff]")


def plain_title(text: str) -> str:
    """A model's (or anyone's) title as plain words: no markup that can ping or link, no
    invisible characters, one line, at most `TITLE_MAX` characters, cut at a word."""
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    line = _CONTROL.sub("", _ANGLED.sub("", _CHANNEL.sub(r"#\1", line)))
    line = _BROADCAST.sub(r"\1", line).replace("<", "").replace(">", "")
    line = re.sub(r"^#+\s+", "", line.strip())  # a Markdown heading's marks
    line = re.sub(r"^title\s*:\s*", "", line, flags=re.IGNORECASE)
    line = line.strip("\"'“”‘’`*_").strip()
    return thread_title(line.rstrip(".")) if line else ""


class Titles:
    """Names conversations in the background; `model` None: the first words only."""

    def __init__(self, db: Database, model: LLM | None, timeout: float, tasks: TaskGroup) -> None:
        self.db = db
        self.model = model
        self.timeout = timeout
        self.tasks = tasks  # tracked: drained on shutdown, awaited by tests' idle()
        self.threads: AgentThreads | None = None  # DM thread titles (set by the app)
        self.spending: SpendGate | None = None  # titles count against budgets (set by the app)

    def name(self, conversation_id: int, question: str, dm_thread: tuple[str, str] | None) -> None:
        """Title a conversation after its first request; `dm_thread` (channel, thread_ts) is
        the agent thread to title as well."""
        self.tasks.spawn(self._name(conversation_id, question, dm_thread), name="title")

    async def _name(
        self, conversation_id: int, question: str, dm_thread: tuple[str, str] | None
    ) -> None:
        try:
            words = plain_title(question)
            if words:
                await self._store(conversation_id, words, only_if_unnamed=True)
            title = await self._from_model(conversation_id, question) or words
            if title and title != words:
                await self._store(conversation_id, title, only_if_unnamed=False)
            if title and dm_thread is not None and self.threads is not None:
                await self.threads.title(*dm_thread, title)
        except Exception as exc:  # a title is a nicety: it never disturbs anything else
            log.warning("could not title conversation %s: %s", conversation_id, type(exc).__name__)

    async def _from_model(self, conversation_id: int, question: str) -> str:
        if self.model is None or not question.strip():
            return ""
        messages: list[ChatCompletionMessageParam] = [
            {"role": "system", "content": INSTRUCTION},
            {"role": "user", "content": question[:QUESTION_CHARS]},
        ]
        try:
            if self.spending is None:
                asked = self.model.complete(messages, TITLE_TOKENS)
                answer = (await asyncio.wait_for(asked, self.timeout)).text
            else:  # at a budget's limit (LLMError) the title is skipped
                counted = self.spending.complete(
                    self.model, conversation_id, None, messages, TITLE_TOKENS
                )
                answer = await asyncio.wait_for(counted, self.timeout)
        except (TimeoutError, LLMError) as exc:
            log.info("no model title (%s): the first words stay", type(exc).__name__)
            return ""
        return plain_title(answer)

    async def _store(self, conversation_id: int, title: str, *, only_if_unnamed: bool) -> None:
        # with other conversations' titles, in one statement (`bot.db.turn_writes`)
        await self.db.group.add(SET_TITLE, Title(conversation_id, title, only_if_unnamed))
