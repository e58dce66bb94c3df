"""What the bot says when a person first opens its DM: what it can do and what needs whose
approval, in words, from the tools actually offered and what the policy in force decides for
each when nothing special applies (its rules without conditions, then its default).

Pure: the Slack side (when, where, once per person) is `bot.slack.dm_welcome`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from bot.policy.engine import names_tool
from bot.policy.model import PolicyFile, Rule
from bot.text import escape
from bot.tools.field_kinds import label_of
from bot.tools.registry import Tool

SHOWN_PER_LINE = 12  # tool names listed in one line before "and N more"

ASK_YOU = "Asks you to approve a card first"
ASK_OTHER = "Asks someone other than you to approve a card first"
ASK_NAMED = "Asks the approvers your team named to approve a card first"
ALLOW = "Runs without a card (your team's policy allows it)"
DENY = "Turned off by your team's policy"
WRITE_GROUPS = (ASK_YOU, ASK_OTHER, ASK_NAMED, ALLOW, DENY)


@dataclass(frozen=True)
class Usually:
    """What the policy decides for a write when nothing special applies."""

    group: str
    varies: bool  # rules with conditions (channel, requester, group, `when`) name it too


def _conditional(rule: Rule) -> bool:
    return bool(rule.when or rule.channels or rule.requesters or rule.groups)


def usually(policy: PolicyFile, tool: str, pack: str) -> Usually:
    """As `bot.policy.engine.decide` reads the rules: a deny wins, else the first rule that
    holds, else the default; here only the rules that hold whatever the call is."""
    named = [r for r in policy.rules if not r.shadow and names_tool(r, tool, pack)]
    varies = any(_conditional(r) for r in named)
    plain = [r for r in named if not _conditional(r)]
    rule = next((r for r in plain if r.outcome == "deny"), plain[0] if plain else None)
    outcome = rule.outcome if rule else policy.default
    if outcome == "deny":
        return Usually(DENY, varies)
    if outcome == "allow":
        return Usually(ALLOW, varies)
    if rule is not None and rule.four_eyes:
        return Usually(ASK_OTHER, varies)
    if rule is not None and rule.approvers:
        return Usually(ASK_NAMED, varies)
    return Usually(ASK_YOU, varies)


def _line(title: str, names: list[str]) -> str:
    shown = names[:SHOWN_PER_LINE]
    more = len(names) - len(shown)
    listed = ", ".join(shown) + (f" and {more} more" if more > 0 else "")
    return f"*{title}:* {listed}."


def _name(tool: Tool[Any]) -> str:
    return escape(label_of(tool.name))


def welcome_text(
    user: str, tools: Iterable[Tool[Any]], policy: PolicyFile, followups: str = "on"
) -> str:
    """The welcome, in Slack mrkdwn, for `user` (a Slack user id, shown as their name)."""
    reads: list[str] = []
    writes: dict[str, list[str]] = {group: [] for group in WRITE_GROUPS}
    varies = False
    for tool in tools:
        if not tool.requires_approval:
            reads.append(_name(tool))
            continue
        found = usually(policy, tool.name, tool.pack)
        writes[found.group].append(_name(tool) + ("¹" if found.varies else ""))
        varies = varies or found.varies
    lines = [
        f"Hi <@{user}>! I'm Countersign, an assistant that asks before it acts. Ask me "
        "anything here."
    ]
    if reads:
        lines.append(_line("I look up on my own", reads))
    for group in WRITE_GROUPS:
        if writes[group]:
            lines.append(_line(group, writes[group]))
    if any(writes[g] for g in (ASK_YOU, ASK_OTHER, ASK_NAMED)):
        lines.append(
            "A card shows exactly what will be sent, and nothing changes until a person "
            "allowed to approve clicks *Approve*."
        )
    if varies:
        lines.append("¹ Sometimes otherwise: your team's policy has rules for particular cases.")
    where = "In a channel, mention me to start"
    if followups == "on":
        where += "; in a thread where I've answered, just reply"
    lines.append(
        f"{where}. `/history` shows what we did together, `/approvals` what waits for you."
    )
    return "\n".join(lines)
