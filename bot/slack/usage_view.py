"""Block Kit for spend, as people read it: what they used today, this week and this month,
each budget that applies to them (its one sentence: used, limit, when it resets, and whom it
counts), and for owners the budgets they own. Shared by `/usage` and the App Home.

Budgets are shown by their names; whom a budget counts is a mention (a channel, a person, a
user group) or words, never an id in plain text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from slack_sdk.models.blocks import (
    Block,
    ContextBlock,
    HeaderBlock,
    MarkdownTextObject,
    SectionBlock,
)

from bot.records.usage_queries import Used
from bot.slack.card_text import safe
from bot.spend.standing import Standing
from bot.spend.windows import money

NO_LIMITS = "No spending limits apply to you here."
NO_LIMITS_HOME = "No spending limits apply to you."
SHOWN = 12  # budgets listed per section (a Home has room for 100 blocks in all)
PERIOD_WORDS = {"day": "Today", "week": "This week", "month": "This month"}


@dataclass(frozen=True)
class OwnUsage:
    """A person's usage per period (`day`, `week`, `month`) and what it cost, if priced."""

    used: dict[str, Used]
    cost_nano: dict[str, int] | None  # None: a model that answered has no price
    models: tuple[str, ...]  # the models that answered this month (else the configured one)
    unpriced: tuple[str, ...] = ()  # of those, the ones without a price


def _names(models: Sequence[str]) -> str:
    shown = [safe(m, 80) for m in models[:4]] + (["others"] if len(models) > 4 else [])
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} and {shown[-1]}"


def usage_note(own: OwnUsage) -> str:
    """Whose prices the costs are at, in words: one model's, or each answer's own model's."""
    lead = "What the answers to your requests used"
    if own.cost_nano is None:
        verb = "has" if len(own.unpriced) == 1 else "have"
        return f"{lead} ({_names(own.unpriced)} {verb} no price set)."
    if len(own.models) == 1:
        return f"{lead}, at {safe(own.models[0], 80)}'s prices."
    return f"{lead}, each answer at the prices of the model that gave it ({_names(own.models)})."


def usage_words(tokens: int, nano: int | None) -> str:
    """ "1,234 tokens, $0.0021" (without a price: "1,234 tokens")."""
    words = f"{tokens:,} tokens" if tokens != 1 else "1 token"
    return words if nano is None else f"{words}, {money(nano)}"


def whom(standing: Standing) -> str:
    """Whom a budget counts, in words a person reads (mentions render as names)."""
    value = safe(standing.scope_value or "", 64)
    return {
        "workspace": "everyone in the workspace",
        "channel": f"<#{value}>",
        "user": f"<@{value}>",
        "group": f"<!subteam^{value}>",
        "pack": f"the {value} tools",
        "per_turn": "each request",
    }.get(standing.scope_kind, "")


def owners_words(standing: Standing) -> str:
    """The owners as mentions (ids are validated by the policy file; escaped all the same)."""
    named = [
        f"<!subteam^{safe(o, 32)}>" if o.startswith("S") else f"<@{safe(o, 32)}>"
        for o in standing.owners[:5]
    ]
    return ", ".join(named) or "nobody"


def _mark(standing: Standing) -> str:
    if standing.reached:
        return ":no_entry: "
    used = _fraction(standing)
    return ":warning: " if standing.soft is not None and used >= standing.soft else ""


def _fraction(standing: Standing) -> float:
    parts = []
    if standing.limit_nano:
        parts.append(standing.used_nano / standing.limit_nano)
    if standing.limit_tokens:
        parts.append(standing.used_tokens / standing.limit_tokens)
    return max(parts, default=0.0)


def own_usage_blocks(own: OwnUsage) -> list[Block]:
    fields = []
    for period, title in PERIOD_WORDS.items():
        used = own.used.get(period, Used())
        cost = None if own.cost_nano is None else own.cost_nano.get(period, 0)
        fields.append(MarkdownTextObject(text=f"*{title}*\n{usage_words(used.total, cost)}"))
    return [
        SectionBlock(fields=fields),
        ContextBlock(elements=[MarkdownTextObject(text=usage_note(own))]),
    ]


def budget_blocks(
    standings: Sequence[Standing], sentence: Callable[[Standing], str], owned: bool = False
) -> list[Block]:
    """One section per budget: its sentence; under it whom it counts (and, for owners, that
    they may raise it)."""
    blocks: list[Block] = []
    for standing in standings[:SHOWN]:
        line = f"{_mark(standing)}{safe(sentence(standing), 400)}"
        about = f"Applies to {whom(standing)}"
        about += (
            " · you approve raises"
            if owned
            else f" · raised by {owners_words(standing)}"
            if standing.owners
            else ""
        )
        blocks.append(SectionBlock(text=MarkdownTextObject(text=line)))
        blocks.append(ContextBlock(elements=[MarkdownTextObject(text=about)]))
    if len(standings) > SHOWN:
        more = len(standings) - SHOWN
        blocks.append(ContextBlock(elements=[MarkdownTextObject(text=f"and {more} more")]))
    return blocks


def usage_message(
    own: OwnUsage,
    applies: Sequence[Standing],
    owned: Sequence[Standing],
    sentence: Callable[[Standing], str],
) -> list[Block]:
    """The ephemeral answer to /usage in one channel."""
    blocks: list[Block] = [
        SectionBlock(text=MarkdownTextObject(text="*Your usage*")),
        *own_usage_blocks(own),
        SectionBlock(text=MarkdownTextObject(text="*Limits that apply to you here*")),
    ]
    if applies:
        blocks += budget_blocks(applies, sentence)
    else:
        blocks.append(SectionBlock(text=MarkdownTextObject(text=NO_LIMITS)))
    if owned:
        blocks.append(SectionBlock(text=MarkdownTextObject(text="*Budgets you own*")))
        blocks += budget_blocks(owned, sentence, owned=True)
    return blocks


def usage_home(
    own: OwnUsage,
    applies: Sequence[Standing],
    owned: Sequence[Standing],
    sentence: Callable[[Standing], str],
) -> list[Block]:
    """The App Home's sections: "Your usage" (with the limits that apply to the person
    anywhere they talked with the bot lately) and, for owners, "Budgets you own"."""
    blocks: list[Block] = [HeaderBlock(text="Your usage"), *own_usage_blocks(own)]
    if applies:
        blocks.append(SectionBlock(text=MarkdownTextObject(text="*Limits that apply to you*")))
        blocks += budget_blocks(applies, sentence)
    else:
        blocks.append(SectionBlock(text=MarkdownTextObject(text=NO_LIMITS_HOME)))
    if owned:
        blocks.append(HeaderBlock(text="Budgets you own"))
        blocks += budget_blocks(owned, sentence, owned=True)
    return blocks
