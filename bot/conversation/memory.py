"""The conversation as the model sees it, within a token budget.

The budget is split: the system prompt and the tools' schemas take what they take, the reply
keeps its reserve, each tool result is capped (longer ones are cut with a note), and history
gets the rest. When the stored conversation no longer fits, the oldest turns are summarised by
the model into a stored summary, and the window becomes: summary + the most recent turns. A
window never begins with tool results whose call fell outside it.

Summaries are made with headroom (the recent part is cut to a fraction of the history budget),
so a long thread is summarised now and then, not on every turn.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from openai.types.chat import ChatCompletionMessageParam

from bot.audience import narrowest_of
from bot.caches import BoundedCache
from bot.conversation import sources as src
from bot.conversation.audiences import Reader, readable
from bot.conversation.history import StoredMessage, to_openai
from bot.conversation.spending import SpendGate
from bot.conversation.tokens import TokenCounter, image_tokens
from bot.conversation.window import budget_start, cap_tool_result, tool_tail, withheld
from bot.db.histories import LOAD_HISTORY, History, Wanted
from bot.db.models import ConversationSummary, Message
from bot.db.session import Database
from bot.files.parts import ImageParts, Vision
from bot.llm import LLM, LLMError
from bot.provenance import Source, delimit

SUMMARY_PROMPT = (
    "You keep the memory of a Slack conversation between teammates and an assistant. Write a "
    "concise summary of the transcript below (and of the earlier summary, if any) that keeps "
    "every fact, decision, open question, name, id and number the assistant may need later. "
    "Plain sentences, no preamble."
)


# Messages loaded after the latest summary; summaries keep the unsummarised tail far shorter.
LOAD_LIMIT = 2_000


@dataclass(frozen=True)
class Budget:
    total: int = 16_000
    reply: int = 2_000
    tool_result: int = 2_000
    summary: int = 600
    headroom: float = 0.6  # after summarising, recent history fills this share of its budget


@dataclass(frozen=True)
class Prompt:
    """What one model request holds, who may read what it holds (the narrowest audience of
    its parts) and every untrusted source it holds (`bot.conversation.sources`), newest last."""

    messages: list[ChatCompletionMessageParam]
    audience: str
    sources: list[Source]


async def _everyone(_audience: str | None) -> bool:
    return True


class Memory:
    def __init__(
        self,
        db: Database,
        llm: LLM,
        counter: TokenCounter,
        budget: Budget,
        vision: Vision | None = None,
    ) -> None:
        self.db = db
        self.llm = llm
        self.counter = counter
        self.budget = budget
        self.images = ImageParts(db, vision or Vision(), image_tokens)  # files' image parts
        # tool sets change at run time: (system prompt, schemas' ids) -> (tokens, the schemas)
        self._fixed: BoundedCache[tuple[str, tuple[int, ...]], tuple[int, tuple[Any, ...]]] = (
            BoundedCache(32)
        )
        self.spending: SpendGate | None = None  # summaries count against budgets (set by turns)

    async def prompt(
        self,
        conversation_id: int,
        system_prompt: str,
        tools: list[dict[str, Any]] | None,
        max_messages: int,
    ) -> list[ChatCompletionMessageParam]:
        """System prompt + (summary) + the most recent messages that fit the budget."""
        return (await self.prompt_for(conversation_id, system_prompt, tools, max_messages)).messages

    async def prompt_for(
        self,
        conversation_id: int,
        system_prompt: str,
        tools: list[dict[str, Any]] | None,
        max_messages: int,
        reader: Reader = _everyone,
        requester: str | None = None,
        history: History | None = None,
    ) -> Prompt:
        """The prompt of a turn whose requester may read what `reader` allows: messages of
        other audiences are left out (`bot.conversation.audiences`); everything but
        `requester`'s own words (and the bot's) is delimited as data. `history`: the
        conversation's history as just read with the request's own write (at most
        `LOAD_LIMIT` messages after the latest summary); None: read here."""
        fixed = self._fixed_cost(system_prompt, tools)
        history_budget = self.budget.total - self.budget.reply - fixed - self.budget.summary
        if history_budget < 200:
            raise LLMError("the token budget is too small for the system prompt and tools")
        latest, loaded = history if history is not None else await self._load(conversation_id)
        summary, carried = src.split_summary(latest.summary) if latest else (None, ())
        if latest is None or not await reader(latest.audience):
            summary, carried = None, ()
        summary_audience = latest.audience if summary is not None and latest else None
        kept = await readable(loaded, reader)
        stored = [k.message for k in kept]
        raw = [to_openai(k.message, requester) if k.shown else withheld(k.message) for k in kept]
        caps = [self.budget.tool_result] * len(raw)
        tail = tool_tail(raw)
        if tail is not None:
            # A turn resumed after its tools ran must see those calls and results: however
            # large, each result is cut to its share so the whole exchange stays in the window.
            share = self._result_share(raw[tail:], int(history_budget * self.budget.headroom))
            caps[tail + 1 :] = [min(cap, share) for cap in caps[tail + 1 :]]
        rendered = [cap_tool_result(m, self.counter, cap) for m, cap in zip(raw, caps, strict=True)]
        if rendered and rendered[-1]["role"] != "tool":
            # The newest message is what the model must answer: however large (a long paste),
            # it stays in the window, cut to fit if it has to be.
            rendered[-1] = self._fit_newest(
                rendered[-1], int(history_budget * self.budget.headroom)
            )
        pictures = await self.images.load(stored, self.llm.model)
        pairs = zip(rendered, stored, strict=True)
        costs = [self.counter.message(m) + pictures.cost(s) for m, s in pairs]
        roles = [str(m.role) for m in stored]
        start = budget_start(costs, roles, history_budget, max_messages)
        if tail is not None:
            start = min(start, tail)
        if start > 0:
            # Older messages do not fit: fold them into the summary, with headroom.
            roomy = budget_start(
                costs, roles, int(history_budget * self.budget.headroom), max_messages // 2 or 1
            )
            if tail is not None:
                roomy = min(roomy, tail)
            older = [k for k in kept[:roomy] if k.shown]
            folded = narrowest_of([summary_audience, *(k.message.audience for k in older)])
            folds = src.summarised(carried, [k.message for k in kept[:roomy] if k.shown])
            try:
                summary = await self._summarise(
                    conversation_id, summary, stored[:roomy], rendered, folded, folds, requester
                )
                summary_audience, start, carried = folded, roomy, tuple(folds)
            except LLMError:
                pass  # no new summary this time: the older messages just drop out of view
        prompt: list[ChatCompletionMessageParam] = [{"role": "system", "content": system_prompt}]
        if summary is not None:
            told = src.summary_source(carried, requester)
            text = summary if told is None else delimit(summary, told)
            prompt.append(
                {"role": "system", "content": f"Summary of the earlier conversation:\n{text}"}
            )
        shown = [k.message for k in kept[start:] if k.shown]
        read = src.summary_untrusted(carried, requester) if summary is not None else []
        return Prompt(
            prompt + pictures.attach(rendered[start:], stored[start:]),
            narrowest_of([summary_audience, *(m.audience for m in shown)]),
            src.newest_last([*read, *src.untrusted_in(shown, requester)]),
        )

    def _result_share(self, tail: Sequence[Any], limit: int) -> int:
        """Tokens each tool result of `tail` (an assistant's calls, then their results) may
        take so that all of it fits `limit`."""
        room = limit - self.counter.message(tail[0])
        return max(50, room // max(len(tail) - 1, 1) - 30)  # 30: the cut note and overhead

    def _fit_newest(self, message: Any, limit: int) -> Any:
        if self.counter.message(message) <= limit:
            return message
        content = str(message.get("content") or "")
        size = self.counter.text(content)
        keep = max(50, limit - 60 - self.counter.message({**message, "content": ""}))
        note = f"\n[cut for the model: the first {keep} of {size} tokens of this message]"
        kept = self.counter.truncate(content, keep)
        return {**message, "content": src.reclosed(kept, content, note)}

    def _fixed_cost(self, system_prompt: str, tools: list[dict[str, Any]] | None) -> int:
        """Tokens of the system prompt and tool schemas: the same on every request, so
        counted once. Keyed by the schemas themselves (the registry builds each once and
        never changes it), not by their JSON: dumping them to make the key cost 0.3 ms a
        request, 18 ms of a busy loop at 60 replies at once. The entry holds the schemas, so
        no other object can take their ids while it is kept."""
        key = (system_prompt, tuple(map(id, tools or ())))
        found = self._fixed.get(key)
        if found is None:
            schemas = json.dumps(tools, sort_keys=True) if tools else ""
            count = self.counter.text(system_prompt) + self.counter.text(schemas)
            found = self._fixed[key] = (count, tuple(tools or ()))
        return found[0]

    async def _load(self, conversation_id: int) -> tuple[ConversationSummary | None, list[Message]]:
        """The latest summary and the messages after it. Read with other turns' reads, from
        one snapshot that takes no place in the writers' queue (`Database.reads`): at 60
        replies at once this read waited there about half a second before each model request."""
        return await self.db.reads.add(LOAD_HISTORY, Wanted(conversation_id, LOAD_LIMIT))

    async def _summarise(
        self,
        conversation_id: int,
        previous: str | None,
        older: Sequence[StoredMessage],
        rendered: Sequence[Any],
        audience: str,
        sources: Sequence[Source] = (),
        requester: str | None = None,
    ) -> str | None:
        """A new summary of `previous` and `older`, stored with the `sources` it holds."""
        if not older:
            return previous
        transcript = "\n".join(
            f"{m['role']}{'(' + m['name'] + ')' if m.get('name') else ''}: "
            f"{m.get('content') or ''}"
            + (f" [calls: {json.dumps(m['tool_calls'])}]" if m.get("tool_calls") else "")
            for m in rendered[: len(older)]
        )
        # Over the summariser's budget: keep the earlier summary and the newest part of the
        # transcript (what happened last matters most); the oldest part gives way.
        limit = self.budget.total - self.budget.summary - 500
        if previous:
            previous = self.counter.truncate(previous, self.budget.summary)
            header = f"Earlier summary:\n{previous}\n\nThen:\n"
            transcript = header + self.counter.keep_end(
                transcript, limit - self.counter.text(header)
            )
        else:
            transcript = self.counter.keep_end(transcript, limit)
        tokens_before = self.counter.text(transcript)
        asked: list[ChatCompletionMessageParam] = [
            {"role": "system", "content": SUMMARY_PROMPT},
            {"role": "user", "content": transcript},
        ]
        if self.spending is None:
            summary = (await self.llm.complete(asked, max_tokens=self.budget.summary)).text
        else:  # at a budget's limit: no new summary (LLMError), the older messages drop out
            summary = await self.spending.complete(
                self.llm, conversation_id, requester, asked, self.budget.summary
            )
        summary = self.counter.truncate(summary, self.budget.summary)
        last = older[-1]
        async with self.db.transaction() as session:
            session.add(
                ConversationSummary(
                    conversation_id=conversation_id,
                    upto_message_id=int(getattr(last, "id", 0)),
                    summary=src.with_sources(summary, sources),
                    messages_summarised=len(older),
                    tokens_before=tokens_before,
                    tokens_after=self.counter.text(summary),
                    audience=audience,
                )
            )
        return summary
