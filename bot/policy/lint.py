"""What `policy check` warns about in a valid file: rules that can never decide, settings that
do nothing where they are, and an ask nobody can approve."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from bot.policy.engine import names_tool
from bot.policy.model import PolicyFile, Rule

_READS = re.compile(r"""\bargs\s*(?:\.\s*([A-Za-z_]\w*)|\[\s*["']([^"']+)["']\s*\])""")


def _catch_all(rule: Rule) -> bool:
    return (
        rule.when is None
        and not (rule.channels or rule.requesters or rule.groups)
        and not rule.shadow
        and rule.outcome != "deny"
    )


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
    policy: PolicyFile, optional: Mapping[tuple[str, str], Iterable[str]] | None = None
) -> list[str]:
    """`optional`: each known tool's optional fields, (tool, pack) -> names."""
    found = []
    covered: set[str] = set()  # tool patterns an earlier unconditional allow/ask decides
    for rule in policy.rules:
        name = f"rule {rule.name!r}"
        if rule.outcome != "deny" and ("*" in covered or set(rule.tools) <= covered):
            found.append(f"{name} is never reached: an earlier rule decides its tools first")
        if rule.outcome != "ask" and (rule.approvers or rule.four_eyes or rule.timeout):
            found.append(f"{name}: approvers, four_eyes and timeout only matter on ask")
        if rule.outcome != "deny" and rule.reason:
            found.append(f"{name}: a reason is only given to the model on deny")
        if rule.outcome == "ask" and rule.four_eyes and not rule.approvers:
            found.append(f"{name}: four_eyes without approvers: nobody may approve")
        if rule.approvals_required > max(1, len(rule.approvers)) and not any(
            a.startswith("S") for a in rule.approvers
        ):
            found.append(f"{name}: approvals_required is more than the approvers named")
        if _catch_all(rule):
            covered.update(rule.tools)
        for tool, field in unguarded_reads(rule, optional or {}):
            found.append(
                f"{name} reads args.{field}, which {tool} may leave out: guard it with "
                f"has(args.{field}) (unguarded, a missing value denies a deny rule's call and "
                "sends an ask to four-eyes approval)"
            )
    return found
