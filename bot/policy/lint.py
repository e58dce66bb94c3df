"""What `policy check` warns about in a valid file: rules that can never decide, settings that
do nothing where they are, and an ask nobody can approve."""

from __future__ import annotations

from bot.policy.model import PolicyFile, Rule


def _catch_all(rule: Rule) -> bool:
    return (
        rule.when is None
        and not (rule.channels or rule.requesters or rule.groups)
        and not rule.shadow
        and rule.outcome != "deny"
    )


def warnings(policy: PolicyFile) -> list[str]:
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
    return found
