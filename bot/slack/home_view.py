"""The App Home as a person's record, in sections: what waits for you (each with a link to its
card, where Approve lives, and a Decline button), your recent work (conversations by title, a
page at a time, and the actions you asked for or decided), your usage (and the budgets you
own), and your grants.

Approve is only on the card: an approval counts for what the approver saw, and the card is
where every character of the write is shown. Declining needs no such view, so it is here too.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    ButtonElement,
    ContextBlock,
    DividerBlock,
    HeaderBlock,
    MarkdownTextObject,
    SectionBlock,
)

from bot.records.queries import ConversationRow, Page
from bot.slack.approvals_view import NOTHING_RECENT, NOTHING_WAITING, Listed, proposal_line
from bot.slack.card_refs import card_ref
from bot.slack.card_values import digest_of
from bot.slack.cards import DECLINE
from bot.slack.record_lines import when
from bot.slack.record_views import EMPTY_HISTORY, conversation_row, page_buttons

HOME_PAGE = "home_page"  # + "_prev" / "_next": the page of your recent work
OPEN_CARD = "home_open_card"  # a link button: Slack still sends its click, which is acked
WAITING_SHOWN = 8
BLOCKS_MAX = 100  # Slack's limit of blocks in a Home tab


def _waiting(items: list[Listed]) -> list[Block]:
    blocks: list[Block] = [HeaderBlock(text="Waiting for you")]
    if not items:
        return [*blocks, SectionBlock(text=MarkdownTextObject(text=NOTHING_WAITING))]
    for item in items[:WAITING_SHOWN]:
        p = item.proposal
        blocks.append(SectionBlock(text=MarkdownTextObject(text=proposal_line(item, True))))
        buttons = []
        if item.card_link:
            buttons.append(
                ButtonElement(
                    text="Open the card",
                    action_id=OPEN_CARD,
                    url=item.card_link,
                    value=str(p.id),
                    style="primary",
                )
            )
        buttons.append(
            ButtonElement(
                text="Decline",
                action_id=DECLINE,
                value=card_ref(p.id, p.revision, digest_of(p.arguments_hash)),
                style="danger",
            )
        )
        blocks.append(ActionsBlock(elements=buttons))
    if len(items) > WAITING_SHOWN:
        more = len(items) - WAITING_SHOWN
        blocks.append(
            ContextBlock(
                elements=[MarkdownTextObject(text=f"and {more} more: `/approvals` lists them")]
            )
        )
    return blocks


def _recent(
    conversations: Page[ConversationRow], recent: list[Listed], team_url: str | None
) -> list[Block]:
    blocks: list[Block] = [HeaderBlock(text="Your recent work")]
    if not conversations.rows and conversations.page == 0:
        blocks.append(SectionBlock(text=MarkdownTextObject(text=EMPTY_HISTORY)))
    else:
        blocks.append(
            ContextBlock(
                elements=[MarkdownTextObject(text=f"Conversations, page {conversations.page + 1}")]
            )
        )
    blocks += [
        SectionBlock(text=MarkdownTextObject(text=conversation_row(row, team_url)))
        for row in conversations.rows
    ]
    blocks += page_buttons(HOME_PAGE, conversations)
    if conversations.page == 0:
        lines = ["• " + proposal_line(item) for item in recent]
        text = "*Actions you asked for or decided*\n" + ("\n".join(lines) or NOTHING_RECENT)
        blocks.append(SectionBlock(text=MarkdownTextObject(text=text[:2900])))
    return blocks


def home_view(
    waiting: list[Listed],
    recent: list[Listed],
    conversations: Page[ConversationRow],
    grants: list[dict[str, Any]],
    team_url: str | None,
    updated: datetime,
    usage: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """`usage`: the "Your usage" sections (`bot.slack.usage_view`), between the recent work
    and the grants."""
    blocks: list[Block] = _waiting(waiting)
    blocks.append(DividerBlock())
    blocks += _recent(conversations, recent, team_url)
    shown = [b.to_dict() for b in blocks]
    if usage:
        shown += [DividerBlock().to_dict(), *usage]
    footer = ContextBlock(elements=[MarkdownTextObject(text=f"Updated {when(updated)}")])
    room = BLOCKS_MAX - len(shown) - 2
    if room > 2:
        shown += [DividerBlock().to_dict(), *grants[:room]]
    return {"type": "home", "blocks": [*shown, footer.to_dict()]}
