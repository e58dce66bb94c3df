"""The subset of the policy file the one-door test generates, and how the reference model
decides a call under it, written from issue 25's specification apart from the bot's code:

Rules in file order; the first matching non-shadow rule decides, but any matching deny rule
wins. A condition that cannot be evaluated: a deny rule denies; otherwise the decision is a
fail-closed ask (the approvers of the first matching ask rule, four-eyes forced, never covered
by a grant or an allow). No match: `default`.

After untrusted input (issue 27): a call that followed outside input (here: a tool result,
the read of #exec) is not covered by an allow (it becomes an ask the requester decides, with
no approvers named) nor by a grant, unless the deciding rule says `after_untrusted: allow`;
`after_untrusted: deny` denies it; `ask` is the default made explicit. A full member's message
is covered as before; a rule setting `after_untrusted` applies after it too, but whether the
bot counts a member's message as a source is not this model's to say (the looser reading: it
does not). A read runs unless a rule naming it (not through `*`) asks or denies; an open-world
read after untrusted input asks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import yaml

from tests.one_door_world import World

Outcome = Literal["allow", "deny", "ask"]
PACK = "tasks"
RAISE, RAISE_PACK = "budget_raise", "budgets"  # asking for more of a budget (issue 29)
BUDGET = "team-daily"


@dataclass(frozen=True)
class Cond:
    """One condition of the few the generator writes.

    `priority`: args.priority == value; `assignee`: args.assignee == value (false when null);
    `assignee_prefix`: args.assignee.startsWith(value) (cannot be evaluated when the optional
    assignee was left out: CEL calls a method on null); `in_group`: value in groups."""

    kind: Literal["priority", "assignee", "assignee_prefix", "in_group"]
    value: str

    def cel(self) -> str:
        if self.kind == "priority":
            return f'args.priority == "{self.value}"'
        if self.kind == "assignee":
            return f'args.assignee == "{self.value}"'
        if self.kind == "assignee_prefix":
            return f'args.assignee.startsWith("{self.value}")'
        return f'"{self.value}" in groups'

    def holds(self, args: dict[str, Any], groups: frozenset[str]) -> bool | None:
        """True / False, or None when it cannot be evaluated."""
        if self.kind == "priority":
            return args.get("priority") == self.value
        if self.kind == "assignee":
            return args.get("assignee") == self.value
        if self.kind == "assignee_prefix":
            assignee = args.get("assignee")
            return None if assignee is None else str(assignee).startswith(self.value)
        return self.value in groups


@dataclass(frozen=True)
class Step:
    after_hours: int
    to: tuple[str, ...] = ()
    outcome: Outcome | None = None


@dataclass(frozen=True)
class Rule:
    name: str
    outcome: Outcome
    tools: tuple[str, ...] = ("create_task", "update_task")
    channels: tuple[str, ...] = ()
    requesters: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    when: Cond | None = None
    approvers: tuple[str, ...] = ()
    approvals_required: int = 1
    four_eyes: bool = False
    route: str = "thread"
    grants: tuple[str, ...] = ()
    escalate: tuple[Step, ...] = ()
    shadow: bool = False
    after_untrusted: Outcome | None = None

    def names(self, tool: str) -> bool:
        return self.names_read(tool) or "*" in self.tools

    def names_read(self, tool: str) -> bool:
        """An allow or ask rule decides a read only when it names it or its pack (an MCP
        tool's server), not by `*` alone."""
        pack = tool.split("__")[0] if "__" in tool else RAISE_PACK if tool == RAISE else PACK
        return tool in self.tools or pack in self.tools

    def as_yaml(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "tools": list(self.tools)}
        if self.channels:
            out["channels"] = list(self.channels)
        if self.requesters:
            out["requesters"] = list(self.requesters)
        if self.groups:
            out["groups"] = list(self.groups)
        if self.when is not None:
            out["when"] = self.when.cel()
        out["outcome"] = self.outcome
        if self.outcome == "deny":
            out["reason"] = f"{self.name} says no"
        if self.shadow:
            out["shadow"] = True
        if self.after_untrusted is not None:
            out["after_untrusted"] = self.after_untrusted
        if self.outcome == "ask":
            if self.approvers:
                out["approvers"] = list(self.approvers)
            if self.approvals_required != 1:
                out["approvals_required"] = self.approvals_required
            if self.four_eyes:
                out["four_eyes"] = True
            if self.route != "thread":
                out["route"] = self.route
            if self.grants:
                out["grants"] = list(self.grants)
            if self.escalate:
                out["escalate"] = [
                    {"after": f"{s.after_hours}h"}
                    | ({"to": list(s.to)} if s.to else {})
                    | ({"outcome": s.outcome} if s.outcome else {})
                    for s in self.escalate
                ]
        return out

    def describe(self) -> str:
        """One line for a counterexample."""
        bits = [f"{self.name}: {self.outcome}"]
        if self.tools != ("create_task", "update_task"):
            bits.append(f"tools={list(self.tools)}")
        for name in ("channels", "requesters", "groups", "approvers", "grants"):
            value = getattr(self, name)
            if value:
                bits.append(f"{name}={list(value)}")
        if self.when is not None:
            bits.append(f"when={self.when.cel()!r}")
        if self.approvals_required != 1:
            bits.append(f"approvals_required={self.approvals_required}")
        if self.four_eyes:
            bits.append("four_eyes")
        if self.route != "thread":
            bits.append(f"route={self.route}")
        if self.escalate:
            bits.append(f"escalate={self.as_yaml()['escalate']}")
        if self.shadow:
            bits.append("shadow")
        if self.after_untrusted:
            bits.append(f"after_untrusted={self.after_untrusted}")
        return " ".join(bits)


DEFAULT_ASK = Rule(name="(default)", outcome="ask")
AFTER_OUTSIDE = Rule(name="(an allow after outside input)", outcome="ask")


@dataclass(frozen=True)
class Policy:
    default: Outcome
    rules: tuple[Rule, ...]
    # The one budget (issue 29): whoever it names decides a raise of it.
    owners: tuple[str, ...] = ("UBOB", "S0LEADS")

    def text(self, version: int) -> str:
        budget = {
            "name": BUDGET,
            "scope": {"workspace": True},
            "window": "day",
            "usd": 12.0,
            "owners": list(self.owners),
        }
        return yaml.safe_dump(
            {
                "version": version,
                "default": self.default,
                "rules": [r.as_yaml() for r in self.rules],
                "budgets": [budget],
            },
            sort_keys=False,
        )

    def rule(self, name: str) -> Rule | None:
        return next((r for r in self.rules if r.name == name), None)

    def describe(self) -> str:
        rules = "; ".join(r.describe() for r in self.rules) or "no rules"
        return f"default {self.default}; {rules}; budget owners {list(self.owners)}"


@dataclass(frozen=True)
class Decision:
    outcome: Outcome
    rule: Rule | None  # the deciding rule; for an ask, the ask rule (None: the default)
    fail_closed: bool = False
    unevaluable: bool = False  # a deny: its rule's condition could not be evaluated
    no_grants: bool = False  # it followed input no grant of its rule covers

    def describe(self) -> str:
        name = self.rule.name if self.rule else "default"
        closed = "fail-closed, " if self.fail_closed else ""
        after = ", no grant covers it" if self.no_grants else ""
        return f"{self.outcome} ({closed}{name}{after})"


def decide(
    policy: Policy,
    tool: str,
    args: dict[str, Any],
    channel: str,
    requester: str,
    world: World,
    outside: bool = False,
    read: bool = False,
    open_world: bool = False,
    untrusted: bool = False,
) -> Decision:
    """`outside`: the call followed outside input (a tool result); `untrusted`: any untrusted
    input the bot surely counts (outside input, here); `read`, `open_world`: the tool's."""
    untrusted = untrusted or outside
    made = _decide(policy, tool, args, channel, requester, world, read)
    if made.outcome == "deny" or made.fail_closed:
        return made
    rule = made.rule if made.rule not in (None, DEFAULT_ASK) else None
    explicit = rule.after_untrusted if rule is not None else None
    if explicit is not None:
        mode = explicit if untrusted else None
    elif read:
        mode = "ask" if open_world and untrusted else None
    else:
        mode = "ask" if outside else None
    if mode is None or mode == "allow":
        return made
    if mode == "deny":
        return Decision("deny", made.rule)
    if made.outcome == "allow":
        return Decision("ask", AFTER_OUTSIDE, no_grants=True)
    return Decision("ask", made.rule, no_grants=True)


def _decide(
    policy: Policy,
    tool: str,
    args: dict[str, Any],
    channel: str,
    requester: str,
    world: World,
    read: bool = False,
) -> Decision:
    groups = world.groups_of(requester)
    first: Rule | None = None
    first_ask: Rule | None = None
    broken = False
    for rule in policy.rules:
        if rule.shadow or not rule.names(tool):
            continue
        if read and rule.outcome != "deny" and not rule.names_read(tool):
            continue
        if rule.channels and channel not in rule.channels:
            continue
        if rule.requesters and requester not in rule.requesters:
            continue
        if rule.groups and not set(rule.groups) & groups:
            continue
        holds = True if rule.when is None else rule.when.holds(args, groups)
        if holds is None:
            if rule.outcome == "deny" or read:  # a read fails closed to deny
                return Decision("deny", rule, unevaluable=True)
            broken = True
            continue
        if not holds:
            continue
        if rule.outcome == "deny":
            return Decision("deny", rule)
        if rule.outcome == "ask" and first_ask is None:
            first_ask = rule
        if first is None:
            first = rule
    if broken:
        return Decision("ask", first_ask, fail_closed=True)
    if first is None and read:
        return Decision("allow", None)  # a read no rule names runs
    if first is None:
        return Decision(policy.default, DEFAULT_ASK if policy.default == "ask" else None)
    return Decision(first.outcome, first)


OWNERS = "(the budget's owners)"


def decide_raise(policy: Policy, asker: str, channel: str, world: World) -> Decision:
    """A raise of the budget (issue 29), as the brief of its feature states it: the rules
    decide it like any write, and any deny (with its reason) refuses it; otherwise it is an
    ask of the budget's owners in the policy in force, whatever the deciding rule said (an
    allow is no exception: no raise passes without a card), with the quorum of a rule naming
    the action or its pack explicitly (else one) and four-eyes always on (this generator never
    writes `four_eyes: false`). No grant or escalation step covers it."""
    made = _decide(policy, RAISE, {}, channel, asker, world)
    if made.outcome == "deny":
        return made
    named = made.rule if made.rule is not None and made.rule.names_read(RAISE) else None
    rule = Rule(
        named.name if named is not None else OWNERS,
        "ask",
        tools=(RAISE,),
        approvers=policy.owners,
        approvals_required=named.approvals_required if named is not None else 1,
        four_eyes=True,
    )
    return Decision("ask", rule, fail_closed=made.fail_closed)


def may_ask_raise(policy: Policy, asker: str, requester: str, world: World) -> bool:
    """Who may ask: the paused turn's requester, or an owner of the budget now."""
    return asker == requester or asker in world.expand(policy.owners)
