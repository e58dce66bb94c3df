"""How the one decision (`bot.policy.engine.decide`) decides a budget raise (issue 29).

A raise is a write: rules naming `budget_raise` or its pack `budgets` decide it like any
other, but its deciders are always the budget's owners in the policy in force (a reload that
removes an owner takes their say away at the next click), and nothing lets it through without
a card: an allow, a grant or an escalation step that allows all become an ask of the owners.
A deny stays a deny, with its rule's reason. From the rule naming it, the raise keeps the
quorum, four-eyes (on unless that rule says `four_eyes: false`: the asker never approves
their own raise alone), timeout, escalation (its reminders and added approvers) and route
(by default: the owners' DMs). A budget the policy in force does not name is denied."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from bot.policy.model import Escalation, PolicyFile, Rule
from bot.spend.raise_action import RAISE_PACK, RAISE_TOOL

if TYPE_CHECKING:
    from bot.policy.engine import Decision, Facts

NO_BUDGET = "the policy in force has no budget of that name"
OWNERS_RULE = "owners of budget {name}"


def is_raise(tool: str) -> bool:
    return tool == RAISE_TOOL


def _naming_rule(policy: PolicyFile, name: str | None) -> Rule | None:
    """The deciding rule, if it names raises explicitly (by tool, pack or a glob; the
    catch-all `*` is about the model's writes and says nothing of a raise's deciders)."""
    from bot.policy.engine import names_read  # explicit naming, as a read's rules need

    rule = next((r for r in policy.rules if r.name == name), None)
    if rule is None or not names_read(rule, RAISE_TOOL, RAISE_PACK):
        return None
    return rule


def owners_rule(policy: PolicyFile, budget: str, decided_by: str | None) -> Rule | None:
    """The ask rule a raise of `budget` is decided under: its owners approve, with the
    settings of the rule naming raises (`decided_by`), if one decided. None: no such budget."""
    found = next((b for b in policy.budgets if b.name == budget), None)
    if found is None:
        return None
    named = _naming_rule(policy, decided_by)
    said = named.model_fields_set if named is not None else set()
    steps = [
        Escalation(after=e.after, to=e.to)
        for e in (named.escalate if named is not None else [])
        if e.outcome is None  # a reminder or more approvers; nobody's silence decides
    ]
    return Rule(
        name=(named.name if named is not None else OWNERS_RULE.format(name=budget))[:100],
        tools=[RAISE_TOOL],
        outcome="ask",
        approvers=list(found.owners),
        approvals_required=named.approvals_required if named is not None else 1,
        four_eyes=named.four_eyes if named is not None and "four_eyes" in said else True,
        timeout=named.timeout if named is not None else None,
        route=named.route if named is not None and "route" in said else "dm",
        escalate=steps,
    )


def decide_raise(policy: PolicyFile, made: Decision, facts: Facts) -> Decision:
    """The decision for a raise, from what the rules made of it (`made`)."""
    from bot.policy.engine import Decision

    if made.outcome == "deny":
        return made
    rule = owners_rule(policy, str(facts.args.get("budget") or ""), made.rule)
    if rule is None:
        return Decision("deny", made.rule, made.version, NO_BUDGET, shadow=made.shadow)
    reason = made.reason if made.failed_closed else None
    return replace(
        made,
        outcome="ask",
        rule=rule.name,
        reason=reason,
        ask=rule,
        after_untrusted=None,
        untrusted_why=None,
    )
