"""Deciding one call: the first matching rule wins, except that any matching deny wins over it.
A deny rule whose condition cannot be evaluated denies (fail closed to deny); any other rule
that cannot be evaluated makes the decision a fail-closed `ask`, which no grant or allow
covers and the requester never decides alone. Shadow rules are evaluated and reported, never
enforced. What the call followed (untrusted input) may then turn an allow into an ask or a
deny (`bot.policy.untrusted`).

A read tool runs unless a rule says otherwise: any rule naming it may deny it, and an allow or
ask rule that names it (by name, pack or a glob other than the catch-all `*`, which is about
writes) decides it like a write; an open-world read after untrusted input asks."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from bot.policy.cel import ConditionError, evaluate_all, quick
from bot.policy.model import LEGACY_RULE, PolicyFile, Rule
from bot.policy.raises import decide_raise, is_raise

DENIED = "forbidden by policy: {reason}, do not retry"


@dataclass(frozen=True)
class Facts:
    """What a condition sees: the names CEL expressions use."""

    tool: str
    pack: str
    args: dict[str, Any]
    channel: str
    requester: str
    groups: tuple[str, ...] = ()
    calls_in_thread: int = 0
    calls_today: int = 0
    read_only: bool = False  # a read tool: it runs unless a rule naming it says otherwise
    # What the call followed (`bot.provenance`): each untrusted source as `{kind, name,
    # author}`, and whether one is outside input (a guest, another organisation, a file, a
    # tool result), which allow rules and grants do not cover by default.
    sources: tuple[dict[str, str], ...] = ()
    untrusted: bool = False
    outside: bool = False
    open_world: bool = False  # a tool that may reach anywhere (an MCP tool not saying otherwise)

    def as_cel(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "pack": self.pack,
            "args": self.args,
            "channel": self.channel,
            "requester": self.requester,
            "groups": list(self.groups),
            "calls_in_thread": self.calls_in_thread,
            "calls_today": self.calls_today,
            "untrusted": self.untrusted,
            "sources": [dict(s) for s in self.sources],
        }


@dataclass(frozen=True)
class Decision:
    outcome: str  # allow | deny | ask
    rule: str | None  # None: the default (or a fail-closed ask)
    version: str
    reason: str | None = None  # deny: why; a fail-closed ask: what could not be evaluated
    ask: Rule | None = None  # the ask rule with approvers, quorum, four-eyes
    shadow: tuple[str, ...] = field(default=())  # "rule:outcome" of matching shadow rules
    failed_closed: bool = False  # an ask because a condition could not be evaluated
    # What following untrusted input made of it (`bot.policy.untrusted`): "ask" (an allow
    # became an ask, or no grant may cover the ask), "deny", or "allow" (the rule lets allows
    # and grants stand after it); None: it followed none, or nothing changed.
    after_untrusted: str | None = None
    untrusted_why: str | None = None  # which sources, in words

    def for_model(self) -> dict[str, Any]:
        return {"status": "denied", "reason": DENIED.format(reason=self.reason or self.rule)}

    def record(self) -> dict[str, Any]:
        """What proposals and audit rows keep of it."""
        kept: dict[str, Any] = {"outcome": self.outcome, "rule": self.rule, "version": self.version}
        if self.reason:
            kept["reason"] = self.reason
        if self.shadow:
            kept["shadow"] = list(self.shadow)
        if self.failed_closed:
            kept["failed_closed"] = True
        if self.after_untrusted:
            kept["after_untrusted"] = self.after_untrusted
            kept["untrusted"] = self.untrusted_why
        if self.ask is not None:
            kept["approvers"] = list(self.ask.approvers)
            kept["approvals_required"] = self.ask.approvals_required
            kept["four_eyes"] = self.ask.four_eyes
            if self.ask.timeout:
                kept["timeout"] = self.ask.timeout
            # Acted on by routing (`bot.slack.card_routing`), grants and the ladder.
            if self.ask.route != "thread":
                kept["route"] = self.ask.route
            if self.ask.grants:
                kept["grants"] = list(self.ask.grants)
                kept["grant_expiry"] = self.ask.grant_expiry
            if self.ask.escalate:
                kept["escalate"] = [e.model_dump(exclude_none=True) for e in self.ask.escalate]
        return kept


@lru_cache(maxsize=4096)
def _tools_pattern(tools: tuple[str, ...]) -> re.Pattern[str]:
    """A rule's `tools` as one compiled pattern, each glob as `fnmatchcase` reads it: every
    proposal meets every rule, and 200 rules were some 800 `fnmatchcase` calls a decision."""
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in tools))


def names_tool(rule: Rule, tool: str, pack: str) -> bool:
    named = _tools_pattern(tuple(rule.tools))
    return named.match(tool) is not None or (bool(pack) and named.match(pack) is not None)


def _applies(rule: Rule, facts: Facts) -> bool:
    """Everything but the tool (`_naming`) and the condition: channel, requester, groups."""
    if rule.channels and facts.channel not in rule.channels:
        return False
    if rule.requesters and facts.requester not in rule.requesters:
        return False
    return not rule.groups or bool(set(rule.groups) & set(facts.groups))


# The rules naming each (tool, pack) of the last few policies: found once, not at every
# proposal (200 rules were some 0.15 ms of pattern matching a decision). Each entry holds its
# policy and rules list, so an id is not reused while cached and a copy is not mistaken for it.
_NAMING: dict[int, tuple[PolicyFile, list[Rule], dict[tuple[str, str], list[Rule]]]] = {}
_POLICIES_KEPT, _TOOLS_KEPT = 8, 4096


def _naming(policy: PolicyFile, tool: str, pack: str) -> list[Rule]:
    entry = _NAMING.get(id(policy))
    if entry is None or entry[0] is not policy or entry[1] is not policy.rules:
        if len(_NAMING) >= _POLICIES_KEPT:
            del _NAMING[next(iter(_NAMING))]
        entry = _NAMING[id(policy)] = (policy, policy.rules, {})
    named = entry[2].get((tool, pack))
    if named is None:
        named = [r for r in policy.rules if names_tool(r, tool, pack)]
        if len(entry[2]) < _TOOLS_KEPT:
            entry[2][(tool, pack)] = named
    return named


def names_read(rule: Rule, tool: str, pack: str) -> bool:
    """Whether an allow or ask rule decides a read tool: it names the tool, its pack or a
    glob matching them, not only the catch-all `*` (which means every write). Rules made from
    `APPROVAL_POLICIES` (who approves writes) never decide a read."""
    if rule.name.startswith(LEGACY_RULE):
        return False
    explicit = tuple(p for p in rule.tools if p != "*")
    if not explicit:
        return False
    named = _tools_pattern(explicit)
    return named.match(tool) is not None or (bool(pack) and named.match(pack) is not None)


def applicable(policy: PolicyFile, facts: Facts) -> list[Rule]:
    """The rules that name the call (any rule naming a read may deny it; an allow or ask
    rule must name it explicitly, `names_read`), in order: only their conditions are
    evaluated."""
    return [
        r
        for r in _naming(policy, facts.tool, facts.pack)
        if (r.outcome == "deny" or not facts.read_only or names_read(r, facts.tool, facts.pack))
        and _applies(r, facts)
    ]


def decides_quickly(rules: list[Rule], facts: Facts) -> bool:
    """Whether `decide` on these rules is fast enough for an event loop (`cel.quick`: no
    worker thread to wait for); otherwise it belongs in a thread."""
    return quick([r.when for r in rules if r.when is not None], facts.as_cel())


def decide(
    policy: PolicyFile, version: str, facts: Facts, rules: list[Rule] | None = None
) -> Decision:
    """`rules`: `applicable(policy, facts)`, when the caller has them already. A budget
    raise is then given to its budget's owners (`bot.policy.raises`)."""
    made = _by_rules(policy, version, facts, rules)
    if is_raise(facts.tool):
        return decide_raise(policy, made, facts)
    return made


def _by_rules(
    policy: PolicyFile, version: str, facts: Facts, rules: list[Rule] | None = None
) -> Decision:
    first: Decision | None = None
    first_rule: Rule | None = None  # the rule that made `first`
    first_ask: Rule | None = None  # who asks, should a broken rule turn the decision to ask
    broken: tuple[str, str] | None = None  # (rule, why) of the first that cannot be evaluated
    shadow: list[str] = []
    rules = applicable(policy, facts) if rules is None else rules
    # Every condition that applies, at once: one conversion of the facts (and at most one
    # worker thread).
    evaluated = iter(evaluate_all([r.when for r in rules if r.when is not None], facts.as_cel()))
    for rule in rules:
        holds = True if rule.when is None else next(evaluated)
        if isinstance(holds, ConditionError):
            if rule.shadow:
                shadow.append(f"{rule.name}:error")
                continue
            why = f"rule {rule.name!r} could not be evaluated ({holds})"
            if facts.read_only or rule.outcome == "deny":  # fail closed to deny
                return Decision("deny", rule.name, version, why, shadow=tuple(shadow))
            broken = broken or (rule.name, why)
            if rule.outcome == "ask":
                first_ask = first_ask or rule
            continue  # a later deny still wins
        if not holds:
            continue
        if rule.shadow:
            shadow.append(f"{rule.name}:{rule.outcome}")
            continue
        if rule.outcome == "deny":
            denied = Decision("deny", rule.name, version, rule.reason or rule.name)
            return _with_shadow(denied, shadow)
        if rule.outcome == "ask":
            first_ask = first_ask or rule
        if first is None:
            first_rule = rule
            first = Decision(
                rule.outcome, rule.name, version, None, rule if rule.outcome == "ask" else None
            )
    if broken is not None:  # fail closed: ask, whatever else matched (but a deny)
        asked = Decision("ask", broken[0], version, broken[1], first_ask, failed_closed=True)
        return _with_shadow(asked, shadow)
    if first is None and facts.read_only:
        first = Decision("allow", None, version)  # a read no rule names runs, as always
    elif first is None:
        default_reason = "no rule allows it" if policy.default == "deny" else None
        first = Decision(policy.default, None, version, default_reason)
    from bot.policy.untrusted import following  # after the decision: what it followed

    return _with_shadow(following(first, first_rule, facts), shadow)


def _with_shadow(decision: Decision, shadow: list[str]) -> Decision:
    return replace(decision, shadow=tuple(shadow))
