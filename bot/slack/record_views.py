"""Block Kit for /history: pure builders over the read models, reading as a
person's record (`bot.slack.record_lines`: titles, dates, what the bot did in words).

Everything people or the model wrote is escaped and clipped; links are built from the team's
URL (auth.test) so listing a page costs no API call per row.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    ButtonElement,
    ConfirmObject,
    DividerBlock,
    MarkdownTextObject,
    SectionBlock,
)

from bot.db.models import Message, Proposal
from bot.records.queries import ConversationRow, Hit, Page
from bot.records.usage_queries import ByModel, Used
from bot.slack.card_text import clip, safe
from bot.slack.record_lines import (
    calls_words,
    decider,
    linked_title,
    place,
    plural,
    reply_link,
    tool_words,
    when,
)
from bot.states import state_label

HISTORY_PAGE = "history_page"
HISTORY_OPEN = "history_open"
HISTORY_THREAD_PAGE = "history_thread_page"
HISTORY_FULL = "history_full_text"
HISTORY_FORGET = "history_forget"
SNIPPET = 280
# Answers' usage per model -> "1,234 tokens, $0.0021" (each model's tokens at its price)
UsageWords = Callable[[ByModel], str]

EMPTY_HISTORY = (
    "You have no conversations with Countersign yet. Mention @Countersign in a channel or "
    "send it a direct message."
)


def _where(team_url: str | None, channel: str, thread_ts: str) -> str:
    link = reply_link(team_url, channel, thread_ts)
    return f"{place(channel)} (<{link}|open>)" if link else place(channel)


def page_buttons(action_id: str, page: Page[Any], extra: str = "") -> list[Block]:
    """Previous / Next (`action_id` + `_prev` / `_next`), each with the page it opens."""
    buttons = []
    if page.page > 0:
        buttons.append(
            ButtonElement(
                text="Previous",
                action_id=f"{action_id}_prev",
                value=json.dumps({"page": page.page - 1, "x": extra}),
            )
        )
    if page.has_next:
        buttons.append(
            ButtonElement(
                text="Next",
                action_id=f"{action_id}_next",
                value=json.dumps({"page": page.page + 1, "x": extra}),
            )
        )
    return [ActionsBlock(elements=buttons)] if buttons else []


def conversation_row(row: ConversationRow, team_url: str | None) -> str:
    """Its title (a link that opens the thread at the bot's latest answer), where and when,
    and what came of it."""
    actions = f" · {plural(row.proposals, 'action')} proposed" if row.proposals else ""
    return clip(
        f"{linked_title(row.title, team_url, row.channel_id, row.thread_ts, row.reply_ts)}\n"
        f"in {place(row.channel_id)} · last activity {when(row.updated_at)} · "
        f"{plural(row.message_count, 'message')}{actions}",
        2900,
    )


def conversation_list(
    page: Page[ConversationRow], team_url: str | None, title: str = "Your conversations"
) -> list[Block]:
    if not page.rows and page.page == 0:
        return [SectionBlock(text=MarkdownTextObject(text=EMPTY_HISTORY))]
    blocks: list[Block] = [
        SectionBlock(text=MarkdownTextObject(text=f"*{title}* (page {page.page + 1})"))
    ]
    for row in page.rows:
        blocks.append(
            SectionBlock(
                text=MarkdownTextObject(text=conversation_row(row, team_url)),
                accessory=ButtonElement(text="Open", action_id=HISTORY_OPEN, value=str(row.id)),
            )
        )
    return blocks + page_buttons(HISTORY_PAGE, page)


def _used_words(by_model: ByModel, usage: UsageWords | None) -> str:
    if usage is not None:
        return usage(by_model)
    return f"{sum(u.total for u in by_model.values()):,} tokens"


def _message_line(
    message: Message,
    hidden: bool = False,
    proposal: Proposal | None = None,
    usage: UsageWords | None = None,
    turn: ByModel | None = None,
) -> tuple[str, bool]:
    """One line per message, in words: what was said (clipped), or what a tool did; a model
    answer with what it used ("1,234 tokens, $0.0021") where its usage is stored, and the last
    answer of a turn of several with the whole turn's (`turn`)."""
    moment = when(message.created_at)
    role = str(message.role)
    if role == "assistant" and not hidden and (message.prompt_tokens or message.completion_tokens):
        prompt, completion = message.prompt_tokens or 0, message.completion_tokens or 0
        own = {message.model: Used(prompt, completion, message.cached_tokens or 0)}
        moment = f"{moment} · {_used_words(own, usage)}"
        if turn:
            moment = f"{moment} (the whole request: {_used_words(turn, usage)})"
    if hidden:
        return (
            f"_{moment}: hidden: tool work for another person's request, or what only people "
            "you are not among may read (only they can see it)_",
            False,
        )
    if role == "tool":
        return f"*Countersign* {moment}: {tool_words(message, proposal)}", False
    if role == "assistant" and message.tool_calls:
        said = f"{safe(message.content, SNIPPET)} " if message.content else ""
        return f"*Countersign* {moment}: {said}_(using {calls_words(message)})_", bool(
            message.content and len(message.content) > SNIPPET
        )
    if role == "system":  # what the bot was told between turns (an approver's words)
        text = message.content or ""
        return f"_Note to Countersign_ {moment}: {safe(text, SNIPPET)}", len(text) > SNIPPET
    who = (
        "*Countersign*"
        if role == "assistant"
        else (f"<@{message.slack_user}>" if message.slack_user else "*Someone*")
    )
    text = message.content or ""
    return f"{who} {moment}: {safe(text, SNIPPET)}", len(text) > SNIPPET


def conversation_detail(
    channel: str,
    thread_ts: str,
    title: str | None,
    team_url: str | None,
    messages: Page[Message],
    proposals: list[Proposal],
    conversation_id: int,
    hidden: set[int] | None = None,
    feedback: dict[int, dict[str, int]] | None = None,
    usage: UsageWords | None = None,
    turns: dict[int, ByModel] | None = None,
) -> list[Block]:
    """`usage`: answers' tokens in words, with their cost where their models have a price;
    `turns`: each turn of several answers, by its last answer (`usage_queries.turn_usage`)."""
    reply = next(
        (m.slack_ts for m in reversed(messages.rows) if str(m.role) == "assistant" and m.slack_ts),
        None,
    )
    blocks: list[Block] = [
        SectionBlock(
            text=MarkdownTextObject(
                text=clip(
                    f"{linked_title(title, team_url, channel, thread_ts, reply)}\n"
                    f"in {place(channel)} · messages, page {messages.page + 1}",
                    2900,
                )
            )
        )
    ]
    by_call = {p.tool_call_id: p for p in proposals}
    for message in messages.rows:
        proposal = by_call.get(message.tool_call_id or "")
        line, clipped = _message_line(
            message,
            message.id in (hidden or set()),
            proposal,
            usage,
            (turns or {}).get(message.id),
        )
        votes = (feedback or {}).get(message.id)
        if votes:
            line += (
                f"\n_Feedback:_ :thumbsup: {votes.get('good', 0)}"
                f" · :thumbsdown: {votes.get('bad', 0)}"
            )
        accessory = (
            ButtonElement(text="Full text", action_id=HISTORY_FULL, value=str(message.id))
            if clipped
            else None
        )
        blocks.append(
            SectionBlock(text=MarkdownTextObject(text=clip(line, 2900)), accessory=accessory)
        )
    if proposals and messages.page == 0:
        lines = [
            f"• {safe(p.description, 200)}: *{state_label(p.state)}*"
            + (f" by {decider(p.decided_by)}" if p.decided_by else "")
            for p in proposals[:20]
        ]
        blocks.append(DividerBlock())
        blocks.append(
            SectionBlock(text=MarkdownTextObject(text=clip("*Actions*\n" + "\n".join(lines), 2900)))
        )
    return blocks + page_buttons(HISTORY_THREAD_PAGE, messages, extra=str(conversation_id))


def search_results(words: str, hits: list[Hit], team_url: str | None) -> list[Block]:
    if not hits:
        return [
            SectionBlock(
                text=MarkdownTextObject(
                    text=f"None of your messages contains “{safe(words, 100)}”."
                )
            )
        ]
    blocks: list[Block] = [
        SectionBlock(
            text=MarkdownTextObject(text=f"*Your messages containing* “{safe(words, 100)}”")
        )
    ]
    for hit in hits:
        c = hit.conversation
        blocks.append(
            SectionBlock(
                text=MarkdownTextObject(
                    text=clip(
                        f"{when(hit.message.created_at)} in "
                        f"{_where(team_url, c.channel_id, c.thread_ts)}: "
                        f"{safe(hit.message.content, SNIPPET)}",
                        2900,
                    )
                )
            )
        )
    return blocks


def forget_prompt() -> list[Block]:
    return [
        SectionBlock(
            text=MarkdownTextObject(
                text=(
                    "This deletes every conversation *you started* with Countersign, with its "
                    "messages. Actions that were carried out keep their audit record, with their "
                    "content removed."
                )
            )
        ),
        ActionsBlock(
            elements=[
                ButtonElement(
                    text="Delete my conversations",
                    action_id=HISTORY_FORGET,
                    value="forget",
                    style="danger",
                    confirm=ConfirmObject(
                        title="Delete your conversations?",
                        text="This cannot be undone.",
                        confirm="Delete",
                        deny="Keep them",
                    ),
                )
            ]
        ),
    ]


def as_dicts(blocks: list[Block]) -> list[dict[str, Any]]:
    return [b.to_dict() for b in blocks]
