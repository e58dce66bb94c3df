"""The card a turn leaves in its thread when a budget stopped it before a model call
(issue 29): what was reached, in words ("Budget reached: support-daily, $12.00 of $12.00
today; resets 00:00 UTC"), and what the requester can do: continue on the budget's cheaper
model, or ask an owner to raise the limit; then who chose what, or (the window reset: the
pause is abandoned) that the request no longer waits. Pure builders; the clicks are
`bot.slack.budget_clicks`. A button's value is the pause's number, never shown."""

from __future__ import annotations

from typing import Any

from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    ButtonElement,
    ContextBlock,
    MarkdownTextObject,
    SectionBlock,
)

from bot.spend.standing import Standing
from bot.spend.windows import sentence
from bot.text import escape

CONTINUE_CHEAPER = "budget_continue_cheaper"
ASK_RAISE = "budget_ask_raise"
REACHED = "Budget reached"


def pause_text(standing: Standing) -> str:
    return f"{REACHED}: {escape(sentence(standing))}"


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


def chosen_line(model: str | None, user: str, budget: str) -> str:
    """Who chose to go on, and on what: the cheaper model, or (`model` None: the budget left
    the policy) the usual one."""
    if model is None:
        return f"{gone_text(budget)}: continuing, chosen by <@{user}>."
    return f"Continuing on {escape(model)}, chosen by <@{user}>."


def chosen_text(reached: str, line: str) -> str:
    return f"{reached}\n{line}"


def chosen_card(reached: str, line: str) -> list[dict[str, Any]]:
    """The card once someone chose to go on (`chosen_line`): what was reached, who chose
    what; no buttons."""
    blocks: list[Block] = [
        SectionBlock(text=MarkdownTextObject(text=f":money_with_wings: {reached}")),
        ContextBlock(elements=[MarkdownTextObject(text=line)]),
    ]
    return [b.to_dict() for b in blocks]


RESET = "The budget has reset since this request paused, so it no longer waits here: ask again."


def reset_text(budget: str) -> str:
    return f"{REACHED}: {escape(budget)}\n{RESET}"


def reset_card(budget: str) -> list[dict[str, Any]]:
    """The card once the window it paused in reset (the pause is abandoned): what was reached
    (its figures were that window's, so only the name), and that asking again is the way on;
    no buttons."""
    blocks: list[Block] = [
        SectionBlock(
            text=MarkdownTextObject(text=f":money_with_wings: {REACHED}: {escape(budget)}")
        ),
        ContextBlock(elements=[MarkdownTextObject(text=RESET)]),
    ]
    return [b.to_dict() for b in blocks]


def gone_text(budget: str) -> str:
    """What a card says once its budget left the policy in force and the request continued."""
    return f"The budget {escape(budget)} is no longer in the policy, so it no longer limits this"
