"""The "Ask to raise" modal (issue 29): the budget's sentence (used, limit, reset), the new
limit for this window in money and/or tokens (whichever the budget limits, prefilled with
twice the limit now) and an optional reason. What comes back is read here too: a value that is
not a number, not more than the limit now, or absurd is an error on its field, and nothing is
proposed."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from slack_sdk.models.blocks import MarkdownTextObject, PlainTextObject, SectionBlock

from bot.slack.budget_card import ASK_RAISE as ASK_RAISE  # the pause card's button
from bot.slack.cards import SECTION_MAX, safe
from bot.spend.raise_action import (
    MAX_TOKENS,
    MAX_USD,
    REASON_MAX,
    RaiseArguments,
    tokens_text,
    when,
)
from bot.spend.standing import Standing, nano_of, usd_of
from bot.spend.windows import money, sentence

RAISE_MODAL = "budget_raise_modal"  # private_metadata: the pause's id
USD, TOKENS, REASON = "usd", "tokens", "reason"  # the inputs' block ids
CENTS = Decimal("0.01")


@dataclass(frozen=True)
class Asked:
    """A valid request: the arguments of the raise to propose."""

    arguments: RaiseArguments


def _input(block_id: str, label: str, initial: str, hint: str, optional: bool) -> dict[str, Any]:
    return {
        "type": "input",
        "block_id": block_id,
        "optional": optional,
        "label": {"type": "plain_text", "text": label},
        "hint": {"type": "plain_text", "text": hint},
        "element": {
            "type": "plain_text_input",
            "action_id": "value",
            "initial_value": initial,
            "max_length": 40,
        },
    }


def raise_modal(pause_id: int, standing: Standing) -> dict[str, Any]:
    """The form for one paused turn's budget, in its window."""
    words = when(standing.window)
    both = standing.limit_nano is not None and standing.limit_tokens is not None
    blocks: list[dict[str, Any]] = [
        SectionBlock(text=MarkdownTextObject(text=safe(sentence(standing), SECTION_MAX))).to_dict()
    ]
    if standing.limit_nano is not None:
        doubled = usd_of(2 * standing.limit_nano).quantize(CENTS)
        hint = f"In US dollars; the limit now is {money(standing.limit_nano)}."
        blocks.append(_input(USD, f"New money limit {words}", str(doubled), hint, both))
    if standing.limit_tokens is not None:
        hint = f"The limit now is {tokens_text(standing.limit_tokens)}."
        label = f"New token limit {words}"
        blocks.append(_input(TOKENS, label, str(2 * standing.limit_tokens), hint, both))
    blocks.append(
        {
            "type": "input",
            "block_id": REASON,
            "optional": True,
            "label": {"type": "plain_text", "text": "Why? (the budget's owners will read this)"},
            "element": {
                "type": "plain_text_input",
                "action_id": "value",
                "multiline": True,
                "max_length": REASON_MAX,
            },
        }
    )
    return {
        "type": "modal",
        "callback_id": RAISE_MODAL,
        "private_metadata": str(pause_id),
        "title": PlainTextObject(text="Ask to raise").to_dict(),
        "submit": PlainTextObject(text="Ask").to_dict(),
        "close": PlainTextObject(text="Cancel").to_dict(),
        "blocks": blocks,
    }


def _number(text: str) -> Decimal | None:
    cleaned = text.strip().removeprefix("$").replace(",", "").replace("_", "").strip()
    if not cleaned or len(cleaned) > 30:
        return None
    try:
        found = Decimal(cleaned)
    except InvalidOperation:
        return None
    return found if found.is_finite() else None


def _usd(text: str, standing: Standing) -> Decimal | str:
    found = _number(text)
    if found is None:
        return "Write an amount in dollars, like 24.00."
    # The bounds first: an absurd amount (1e30, -1e30) has no cents within Decimal's precision.
    if found > MAX_USD:
        return f"That is more than any budget may hold ({money(nano_of(MAX_USD))}); ask for less."
    assert standing.limit_nano is not None
    if nano_of(found) <= standing.limit_nano:
        return f"Ask for more than the limit now, {money(standing.limit_nano)}."
    if found != found.quantize(CENTS):
        return "Write the amount in dollars and cents, like 24.50."
    return found.quantize(CENTS)


def _tokens(text: str, standing: Standing) -> int | str:
    found = _number(text)
    if found is None or found != found.to_integral_value():
        return "Write a whole number of tokens, like 400000."
    if found > MAX_TOKENS:
        return f"That is more than any budget may hold ({MAX_TOKENS:,} tokens); ask for less."
    assert standing.limit_tokens is not None
    if found <= standing.limit_tokens:
        return f"Ask for more than the limit now, {tokens_text(standing.limit_tokens)}."
    return int(found)


def read_raise(values: dict[str, str], standing: Standing) -> Asked | dict[str, str]:
    """The raise asked for, or the errors to show on the form (block id -> words)."""
    errors: dict[str, str] = {}
    usd: Decimal | None = None
    tokens: int | None = None
    typed_usd = (values.get(USD) or "").strip()
    typed_tokens = (values.get(TOKENS) or "").strip()
    if standing.limit_nano is not None and typed_usd:
        got = _usd(typed_usd, standing)
        usd = got if isinstance(got, Decimal) else None
        if isinstance(got, str):
            errors[USD] = got
    if standing.limit_tokens is not None and typed_tokens:
        counted = _tokens(typed_tokens, standing)
        tokens = counted if isinstance(counted, int) else None
        if isinstance(counted, str):
            errors[TOKENS] = counted
    if not errors and usd is None and tokens is None:
        block = USD if standing.limit_nano is not None else TOKENS
        errors[block] = "Say what the new limit should be."
    reason = (values.get(REASON) or "").strip()
    if len(reason) > REASON_MAX:
        errors[REASON] = f"Keep the reason to {REASON_MAX} characters or fewer."
    if errors:
        return errors
    return Asked(
        RaiseArguments(
            budget=standing.name,
            window=standing.window_key,
            usd=usd,
            tokens=tokens,
            reason=reason or None,
        )
    )
