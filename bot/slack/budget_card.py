"""The card a turn leaves in its thread when a budget stopped it before a model call
(issue 29): what was reached, in words ("Budget reached: support-daily, $12.00 of $12.00
today; resets 00:00 UTC"), and what the requester can do: continue on the budget's cheaper
model, or ask an owner to raise the limit. Pure builders; the clicks are
`bot.slack.budget_clicks`. A button's value is the pause's number, never shown."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    ButtonElement,
    ContextBlock,
    MarkdownTextObject,
    SectionBlock,
)

from bot.spend.standing import Standing, usd_of
from bot.text import escape

CONTINUE_CHEAPER = "budget_continue_cheaper"
ASK_RAISE = "budget_ask_raise"
REACHED = "Budget reached"

_PERIOD = {"day": "today", "week": "this week", "month": "this month", "turn": "this turn"}


def budget_sentence(standing: Standing) -> str:
    """ "support-daily, $12.00 of $12.00 today; resets 00:00 UTC".

    A stand-in for `bot.spend.windows`'s sentence (helper S1's), replaced by it once it lands
    so the card, /usage and the Home say it one way."""
    used: list[str] = []
    if standing.limit_nano is not None:
        used.append(f"{_usd(standing.used_nano)} of {_usd(standing.limit_nano)}")
    if standing.limit_tokens is not None:
        used.append(f"{standing.used_tokens:,} of {standing.limit_tokens:,} tokens")
    said = f"{standing.name}, {' and '.join(used)} {_PERIOD.get(standing.window, '')}".rstrip()
    if standing.resets_at is not None:
        at = standing.resets_at
        when = at.strftime("%H:%M")
        if standing.window == "week":
            when = f"{at.strftime('%A')} {when}"
        elif standing.window == "month":
            when = f"{at.day} {at.strftime('%b')} {when}"
        said += f"; resets {when} {standing.timezone}"
    return said


def _usd(nano: int) -> str:
    return f"${usd_of(nano).quantize(Decimal('0.01')):,}"


def pause_text(standing: Standing) -> str:
    return f"{REACHED}: {escape(budget_sentence(standing))}"


def pause_card(standing: Standing, pause_id: int, requester: str) -> list[dict[str, Any]]:
    """The card's blocks: what was reached, then the two ways on."""
    fallback = standing.fallback_model
    buttons: list[ButtonElement] = []
    if fallback:
        buttons.append(
            ButtonElement(
                text="Continue on a cheaper model",
                action_id=CONTINUE_CHEAPER,
                value=str(pause_id),
                style="primary",
            )
        )
    buttons.append(ButtonElement(text="Ask to raise", action_id=ASK_RAISE, value=str(pause_id)))
    offer = f"continue on {escape(fallback)}, or " if fallback else ""
    blocks: list[Block] = [
        SectionBlock(text=MarkdownTextObject(text=f":money_with_wings: {pause_text(standing)}")),
        ContextBlock(
            elements=[
                MarkdownTextObject(
                    text=f"<@{requester}>'s request waits here: {offer}"
                    "ask an owner of the budget to raise its limit."
                )
            ]
        ),
        ActionsBlock(elements=buttons),
    ]
    return [b.to_dict() for b in blocks]


def chosen_text(reached: str, model: str, user: str) -> str:
    return f"{reached}\nContinuing on {escape(model)}, chosen by <@{user}>."


def chosen_card(reached: str, model: str, user: str) -> list[dict[str, Any]]:
    """The card once someone chose the cheaper model: what was reached, who chose what; no
    buttons."""
    blocks: list[Block] = [
        SectionBlock(text=MarkdownTextObject(text=f":money_with_wings: {reached}")),
        ContextBlock(
            elements=[
                MarkdownTextObject(text=f"Continuing on {escape(model)}, chosen by <@{user}>.")
            ]
        ),
    ]
    return [b.to_dict() for b in blocks]
