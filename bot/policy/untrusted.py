"""What a decision becomes when the call followed untrusted input (design promise 9).

A call's facts say what the model had read in its turn before proposing it (`sources`,
`untrusted`, `outside`: `bot.provenance`). Text someone else wrote may have steered the call,
so by default an allow does not stand after *outside* input (a guest, another organisation, a
file, a tool result): the call becomes an ask, with the approvers it would have had without
the allow (none named: the requester), and no grant covers an ask made after it. A full
member's message is accountable: allows and grants stand after it.

A rule may say otherwise with `after_untrusted` (`allow`, `ask` or `deny`); it then applies
after *any* untrusted input, a member's message included:

- `allow`: the rule's allow, and grants of its cards, stand after untrusted input;
- `ask`: its allow becomes an ask, and no grant covers its asks;
- `deny`: the call is denied, with a reason saying it followed untrusted input.

Reads run after untrusted input (their results are untrusted input themselves, and a read of
Slack, GitHub or Linear carries nothing out), except an *open-world* read (an MCP tool that
does not say `openWorldHint: false`): its arguments may carry data anywhere, so after any
untrusted input it becomes an ask, whose card shows every argument. A rule naming the read
with `after_untrusted: allow` lets it run.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from bot.policy.engine import Decision, Facts
from bot.policy.model import Rule
from bot.provenance import OUTSIDE, Source

SHOWN = 3  # sources named in a reason; the card lists them all


def with_context(facts: Facts, sources: Iterable[Source]) -> Facts:
    """`facts` with the facts `sources`, `untrusted` and `outside` of what the call followed
    (only its untrusted sources: the requester's own words are not a source the policy
    weighs)."""
    untrusted = [s for s in sources if s.untrusted]
    return replace(
        facts,
        sources=tuple(s.fact() for s in untrusted),
        untrusted=bool(untrusted),
        outside=any(s.outside for s in untrusted),
    )


def described(facts: Facts, only_outside: bool = False) -> str:
    """The untrusted sources in words: "a file (report.pdf), a tool result (github_get_issue)"."""
    words = {
        "member": "a teammate's message",
        "guest": "a guest's message",
        "external": "a message from another organisation",
        "file": "a file",
        "tool": "a tool result",
    }
    shown = [s for s in facts.sources if not only_outside or s.get("kind") in OUTSIDE]
    named = []
    for source in shown[:SHOWN]:
        kind, name = source.get("kind", ""), source.get("name", "")
        what = words.get(kind, "input")
        named.append(f"{what} ({name})" if kind in ("file", "tool") and name else what)
    more = len(shown) - SHOWN
    return ", ".join(named) + (f" and {more} more" if more > 0 else "")


def mode(rule: Rule | None, facts: Facts) -> str | None:
    """What `after_untrusted` applies to this call: "allow", "ask", "deny", or None (it
    followed nothing that changes its decision)."""
    explicit = rule.after_untrusted if rule is not None else None
    if explicit is not None:
        return explicit if facts.untrusted else None
    if facts.read_only:
        return "ask" if facts.open_world and facts.untrusted else None
    return "ask" if facts.outside else None


def following(decision: Decision, rule: Rule | None, facts: Facts) -> Decision:
    """`decision` (made by `rule`, None: the default) after what the call followed."""
    if decision.outcome == "deny" or decision.failed_closed:
        return decision
    applied = mode(rule, facts)
    if applied is None:
        return decision
    explicit = rule is not None and rule.after_untrusted is not None
    why = described(facts, only_outside=not explicit and not facts.read_only)
    if facts.read_only and not explicit:
        why = f"an open-world read after {why}"
    else:
        why = f"proposed after {why}"
    if applied == "allow":
        return replace(decision, after_untrusted="allow", untrusted_why=why)
    if applied == "deny":
        reason = f"it followed untrusted input ({why})"
        return replace(
            decision, outcome="deny", reason=reason, ask=None, after_untrusted="deny",
            untrusted_why=why,
        )  # fmt: skip
    if decision.outcome == "allow":  # a card instead, for the requester as without a rule
        return replace(decision, outcome="ask", ask=None, after_untrusted="ask", untrusted_why=why)
    return replace(decision, after_untrusted="ask", untrusted_why=why)


def grants_stand(record: dict[str, object]) -> bool:
    """Whether a grant may cover an ask recorded so: not one made after untrusted input the
    rule lets no grant cover."""
    return record.get("after_untrusted") != "ask"
