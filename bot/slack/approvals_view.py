"""/approvals (and the App Home's lists of actions) as Block Kit: each action in words, with
who asked, its state and who decided, the link to its card, and the conversation it came from
for those who may read it."""

from __future__ import annotations

from dataclasses import dataclass

from slack_sdk.models.blocks import Block, MarkdownTextObject, SectionBlock

from bot.db.models import Proposal
from bot.slack.card_text import clip, safe
from bot.slack.record_lines import decider, when
from bot.states import state_label


@dataclass(frozen=True)
class Listed:
    """A proposal as /approvals and the App Home list it: with a link to its card and, for
    those who may read the thread it came from, that conversation's title and link."""

    proposal: Proposal
    card_link: str | None
    title: str | None = None
    thread_link: str | None = None


def proposal_line(item: Listed, waiting: bool = False) -> str:
    """`*Create task 'X'*` then who asked, in which conversation, and its state or expiry;
    the card's link last."""
    p = item.proposal
    line = f"*{safe(p.description, 200)}*"
    if not waiting:
        line += f" → *{state_label(p.state)}*"
        if p.decided_by:
            line += f" by {decider(p.decided_by)}"
    line += f"\nasked by <@{p.requester}>"
    if item.thread_link:
        line += f" in <{item.thread_link}|{safe(item.title or 'a thread', 80)}>"
    elif item.title:
        line += f" in “{safe(item.title, 80)}”"
    if waiting:
        line += f" · expires {when(p.expires_at)}"
    else:
        line += f" · {when(p.decided_at or p.updated_at or p.created_at)}"
    return line + (f" · <{item.card_link}|the card>" if item.card_link else "")


def _titled(title: str, lines: list[str], empty: str) -> SectionBlock:
    body = "\n".join(lines) if lines else empty
    return SectionBlock(text=MarkdownTextObject(text=clip(f"*{title}*\n{body}", 2900)))


NOTHING_WAITING = "Nothing is waiting for you."
NOTHING_RECENT = "You have not asked for or decided on any action lately."


def approvals_view(waiting: list[Listed], recent: list[Listed]) -> list[Block]:
    return [
        _titled(
            "Waiting for your decision",
            [proposal_line(item, waiting=True) for item in waiting],
            NOTHING_WAITING,
        ),
        _titled(
            "Your recent actions",
            ["• " + proposal_line(item) for item in recent],
            NOTHING_RECENT,
        ),
    ]
