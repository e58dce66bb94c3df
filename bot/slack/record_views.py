"""Block Kit for /history, /approvals and the App Home: pure builders over the read models.

Everything people or the model wrote is escaped and clipped; links are built from the team's
URL (auth.test) so listing a page costs no API call per row.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    ButtonElement,
    ConfirmObject,
    ContextBlock,
    DividerBlock,
    HeaderBlock,
    MarkdownTextObject,
    SectionBlock,
)

from bot.db.models import Message, Proposal
from bot.records.queries import ConversationRow, Hit, Page
from bot.slack.cards import clip, decider, safe, slack_date
from bot.states import state_label

HISTORY_PAGE = "history_page"
HISTORY_OPEN = "history_open"
HISTORY_THREAD_PAGE = "history_thread_page"
HISTORY_FULL = "history_full_text"
HISTORY_FORGET = "history_forget"
SNIPPET = 280

EMPTY_HISTORY = (
    "You have no conversations with Countersign yet. Mention @Countersign in a channel or "
    "send it a direct message."
)


def thread_link(team_url: str | None, channel: str, thread_ts: str) -> str | None:
    if not team_url:
        return None
    base = f"{team_url.rstrip('/')}/archives/{channel}"
    return f"{base}/p{thread_ts.replace('.', '')}" if thread_ts else base


def _where(team_url: str | None, channel: str, thread_ts: str) -> str:
    link = thread_link(team_url, channel, thread_ts)
    label = "thread" if thread_ts else "DM"
    return f"<#{channel}> <{link}|{label}>" if link else f"<#{channel}> {label}"


def _nav(action_id: str, page: Page[Any], extra: str = "") -> list[Block]:
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


def conversation_list(
    page: Page[ConversationRow], team_url: str | None, title: str = "Your conversations"
) -> list[Block]:
    if not page.rows and page.page == 0:
        return [SectionBlock(text=MarkdownTextObject(text=EMPTY_HISTORY))]
    blocks: list[Block] = [
        SectionBlock(text=MarkdownTextObject(text=f"*{title}* (page {page.page + 1})"))
    ]
    for row in page.rows:
        text = (
            f"{_where(team_url, row.channel_id, row.thread_ts)} · started "
            f"{slack_date(row.created_at)} · last activity {slack_date(row.updated_at)}\n"
            f"{row.message_count} messages · {row.tokens} tokens · "
            f"{row.proposals} action{'s' if row.proposals != 1 else ''} proposed"
        )
        blocks.append(
            SectionBlock(
                text=MarkdownTextObject(text=text),
                accessory=ButtonElement(text="Open", action_id=HISTORY_OPEN, value=str(row.id)),
            )
        )
    return blocks + _nav(HISTORY_PAGE, page)


def _message_line(message: Message, hidden: bool = False) -> tuple[str, bool]:
    """One line per message: text (clipped), or a tool call / result on one line."""
    when = slack_date(message.created_at)
    role = str(message.role)
    if hidden:
        return (
            f"_{when}: hidden: tool work for another person's request, or what only people "
            "you are not among may read (only they can see it)_",
            False,
        )
    if role == "tool":
        if message.content is None:
            return f"← `{safe(message.tool_name, 60)}`: waiting for approval", False
        body = message.content
        return f"← `{safe(message.tool_name, 60)}` {when}: {safe(body, SNIPPET)}", len(
            body
        ) > SNIPPET
    if role == "assistant" and message.tool_calls:
        calls = "; ".join(
            f"`{safe(str(c['function']['name']), 60)}` {safe(c['function']['arguments'], 120)}"
            for c in message.tool_calls
        )
        prefix = f"{safe(message.content, SNIPPET)} " if message.content else ""
        return f"*Countersign* {when}: {prefix}→ {calls}", bool(
            message.content and len(message.content) > SNIPPET
        )
    tokens = (message.prompt_tokens or 0) + (message.completion_tokens or 0)
    when = f"{when} · {tokens} tokens" if tokens else when
    who = (
        "*Countersign*"
        if role == "assistant"
        else (f"<@{message.slack_user}>" if message.slack_user else f"*{role}*")
    )
    text = message.content or ""
    return f"{who} {when}: {safe(text, SNIPPET)}", len(text) > SNIPPET


def conversation_detail(
    channel: str,
    thread_ts: str,
    team_url: str | None,
    messages: Page[Message],
    proposals: list[Proposal],
    conversation_id: int,
    hidden: set[int] | None = None,
    feedback: dict[int, dict[str, int]] | None = None,
) -> list[Block]:
    blocks: list[Block] = [
        SectionBlock(
            text=MarkdownTextObject(
                text=f"*Conversation* in {_where(team_url, channel, thread_ts)} "
                f"(messages, page {messages.page + 1})"
            )
        )
    ]
    for message in messages.rows:
        line, clipped = _message_line(message, message.id in (hidden or set()))
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
    return blocks + _nav(HISTORY_THREAD_PAGE, messages, extra=str(conversation_id))


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
                        f"{slack_date(hit.message.created_at)} in "
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


def _proposal_line(p: Proposal, link: str | None) -> str:
    where = f" <{link}|card>" if link else ""
    when = slack_date(p.decided_at or p.updated_at or p.created_at)
    return f"• {safe(p.description, 200)}: *{state_label(p.state)}* {when}{where}"


def _titled(title: str, lines: list[str], empty: str) -> SectionBlock:
    body = "\n".join(lines) if lines else empty
    return SectionBlock(text=MarkdownTextObject(text=clip(f"*{title}*\n{body}", 2900)))


def approvals_view(
    waiting: list[tuple[Proposal, str | None]], recent: list[tuple[Proposal, str | None]]
) -> list[Block]:
    return [
        _titled(
            "Waiting for your decision",
            [
                _proposal_line(p, link) + f" (expires {slack_date(p.expires_at)})"
                for p, link in waiting
            ],
            "Nothing is waiting for you.",
        ),
        _titled(
            "Your recent actions",
            [_proposal_line(p, link) for p, link in recent],
            "You have not asked for or decided on any action lately.",
        ),
    ]


def home_view(
    waiting: list[tuple[Proposal, str | None]],
    recent: list[tuple[Proposal, str | None]],
    conversations: Page[ConversationRow],
    team_url: str | None,
    updated: datetime,
) -> dict[str, Any]:
    blocks: list[Block] = [HeaderBlock(text="Countersign")]
    blocks += approvals_view(waiting, recent)
    blocks.append(DividerBlock())
    blocks += conversation_list(conversations, team_url, "Your conversations")
    blocks.append(
        ContextBlock(elements=[MarkdownTextObject(text=f"Updated {slack_date(updated)}")])
    )
    return {"type": "home", "blocks": [b.to_dict() for b in blocks]}


def as_dicts(blocks: list[Block]) -> list[dict[str, Any]]:
    return [b.to_dict() for b in blocks]
