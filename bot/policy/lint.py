"""What `policy check` warns about in a valid file: every rule or field that cannot take
effect, each with the rule's name and why: rules an earlier rule always decides first, tool
names that match no known tool, settings that do nothing where they are (an ask's settings
on an allow or a deny, `after_untrusted` on a deny), and an ask nobody can approve."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable, Mapping

from bot.policy.engine import names_tool
from bot.policy.model import PolicyFile, Rule
from bot.spend.raise_action import RAISE_PACK, RAISE_TOOL

_READS = re.compile(r"""\bargs\s*(?:\.\s*([A-Za-z_]\w*)|\[\s*["']([^"']+)["']\s*\])""")


def _covers(earlier: Rule, later: Rule) -> bool:
    """Whether `earlier` matches every call `later` matches (same or no condition, a wider
    or equal scope, its tools), so `later` never decides: an earlier deny always wins; an
    earlier allow or ask wins unless `later` is a deny (any matching deny wins). The
    catch-all `*` of an allow or ask is about writes: a later rule may still decide a read
    it names, so only a deny's `*` covers every tool."""
    if earlier.shadow or later.shadow or (later.outcome == "deny" and earlier.outcome != "deny"):
        return False
    if earlier.when is not None and earlier.when != later.when:
        return False
    for wide, narrow in (
        (earlier.channels, later.channels),
        (earlier.requesters, later.requesters),
        (earlier.groups, later.groups),
    ):
        if wide and not (narrow and set(narrow) <= set(wide)):
            return False
    if "*" in earlier.tools:
        return earlier.outcome == "deny" or "*" in later.tools
    return set(later.tools) <= set(earlier.tools)


ASK_ONLY = (
    "approvers",
    "four_eyes",
    "timeout",
    "approvals_required",
    "route",
    "grants",
    "grant_expiry",
    "escalate",
)


def _ask_fields(rule: Rule) -> list[str]:
    """The ask-only fields set on a rule (their defaults: not set)."""
    set_ = rule.model_fields_set
    found = [f for f in ASK_ONLY if f in set_]
    defaults = {"approvals_required": 1, "route": "thread", "four_eyes": False}
    return [f for f in found if getattr(rule, f) not in (defaults.get(f), [], None)]


def unknown_tools(
    rule: Rule, known: Iterable[tuple[str, str]], elsewhere: Callable[[str], bool]
) -> list[str]:
    """The rule's tool names and globs that match no known tool or pack (`elsewhere`: a name
    that may belong to tools not loaded here, such as an MCP server's)."""
    tools = list(known)
    return [
        p
        for p in rule.tools
        if p != "*"
        and not elsewhere(p)
        and not any(
            fnmatch.fnmatchcase(n, p) or (bool(k) and fnmatch.fnmatchcase(k, p)) for n, k in tools
        )
    ]


def unguarded_reads(
    rule: Rule, optional: Mapping[tuple[str, str], Iterable[str]]
) -> list[tuple[str, str]]:
    """(tool, field) pairs where the rule's condition reads an argument the tool may leave
    out without asking `has(args.FIELD)` first. `optional`: (tool, pack) -> its optional
    fields. Such a condition cannot be evaluated when the field is missing or null (a deny
    then denies, an ask fails closed): the author should say what they meant."""
    if not rule.when:
        return []
    read = {a or b for a, b in _READS.findall(rule.when)}
    found = []
    for (tool, pack), fields in optional.items():
        if not names_tool(rule, tool, pack):
            continue
        for field in sorted(read & set(fields)):
            guarded = re.search(rf"has\(\s*args\s*\.\s*{re.escape(field)}\s*\)", rule.when)
            if not guarded:
                found.append((tool, field))
    return found


def warnings(
    policy: PolicyFile,
    optional: Mapping[tuple[str, str], Iterable[str]] | None = None,
    known: Iterable[tuple[str, str]] | None = None,
    elsewhere: Callable[[str], bool] = lambda _name: False,
) -> list[str]:
    """`optional`: each known tool's optional fields, (tool, pack) -> names; `known`: every
    tool (name, pack) when the tool list is known (None: tool names are not checked)."""
    found = []
    for index, rule in enumerate(policy.rules):
        name = f"rule {rule.name!r}"
        earlier = next((e for e in policy.rules[:index] if _covers(e, rule)), None)
        if earlier is not None:
            found.append(
                f"{name} is never reached: an earlier rule ({earlier.name!r}) decides its "
                "tools first"
            )
        if rule.outcome != "ask":
            for field in _ask_fields(rule):
                found.append(f"{name}: {field} only matters on ask, not on {rule.outcome}")
        if rule.outcome != "deny" and rule.reason:
            found.append(f"{name}: a reason is only given to the model on deny")
        if rule.after_untrusted is not None and rule.outcome == "deny":
            found.append(f"{name}: after_untrusted does nothing on deny (a deny always denies)")
        if rule.outcome == "ask" and rule.after_untrusted in ("allow", "ask") and not rule.grants:
            found.append(
                f"{name}: after_untrusted: {rule.after_untrusted} on an ask without grants "
                "changes nothing (it says whether grants cover a call after untrusted input)"
            )
        if rule.outcome == "ask" and rule.four_eyes and not rule.approvers:
            found.append(f"{name}: four_eyes without approvers: nobody may approve")
        raises_only = all(t in (RAISE_TOOL, RAISE_PACK) for t in rule.tools)  # owners decide
        if (
            rule.approvals_required > max(1, len(rule.approvers))
            and not any(a.startswith("S") for a in rule.approvers)
            and not raises_only
        ):
            found.append(f"{name}: approvals_required is more than the approvers named")
        if rule.grants and rule.approvals_required != 1 and rule.outcome == "ask":
            found.append(f"{name}: grants are only offered on rules that need one approval")
        if known is not None:
            for pattern in unknown_tools(rule, known, elsewhere):
                found.append(f"{name}: {pattern!r} matches no known tool or pack")
        for tool, field in unguarded_reads(rule, optional or {}):
            found.append(
                f"{name} reads args.{field}, which {tool} may leave out: guard it with "
                f"has(args.{field}) (unguarded, a missing value denies a deny rule's call and "
                "sends an ask to four-eyes approval)"
            )
    return found
