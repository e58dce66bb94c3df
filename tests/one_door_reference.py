"""A reference model of who may make a write run, written from the specification of issue 25
("One door for every approval"), apart from the bot's code: nothing here imports `bot`.

It knows the small world of tests/one_door_world.py, the policy subset of
tests/one_door_policy.py, and the calls the test made the bot see. Asked
about a write that ran, it says whether that write was allowed at that moment, and if not, why.
The bot may be stricter than this model, never looser: where the specification could be read
two ways, the model takes the looser reading, so a violation it reports is one under every
reading.

The rules it checks (the specification, in short):
1. Rules in file order; the first matching non-shadow rule decides, but any matching deny rule
   wins. A condition that cannot be evaluated: a deny rule denies; otherwise the decision is a
   fail-closed ask (approvers of the first matching ask rule, four-eyes forced, never covered by
   a grant or an allow). No match: `default`.
2. A write may run at its execution start, for the policy in force then and the exact
   arguments sent, only when the outcome is allow (not fail-closed), or it is ask and either
   (a) the votes on the current revision by distinct people who are now approvers (by id, or in
   a named user group now), who can read the data's audience, and under four-eyes are neither
   the requester nor the last editor, number at least `approvals_required` (no approvers and no
   four-eyes: the requester alone decides); or (b) a live grant covers it: made from a card of
   the same rule, unchanged since, same requester and tool, scope thread (same thread; in a DM
   the same turn only) / channel / me, the granter still an approver able to read the call's
   audience, quorum 1, not fail-closed, and the call did not follow outside input (a tool
   result) unless its rule says `after_untrusted: allow`; or (c) the rule in force has an
   escalation step with outcome allow that is due, and the call did not follow outside input
   (as for a grant; a later deny step then ends the ladder). After outside input an allow is
   an ask the requester decides, and `after_untrusted: deny` denies (tests/one_door_policy.py).
3. Every message the bot posts is readable by everyone who can see where it is posted.
4. A budget raise (issue 29) is a write like the others, decided as
   tests/one_door_policy.py's `decide_raise` says: only the budget's owners now, never its
   asker, in the quorum a rule naming it asks; it runs at most once, to the limit its card
   showed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.one_door_policy import RAISE, Decision, Policy, Rule, decide, decide_raise
from tests.one_door_world import World


@dataclass
class Call:
    """One write call the model made the bot see, as this model follows it."""

    key: str  # the text tag that names it (in the title): p3, u4
    tool: str
    requester: str
    channel: str
    thread: str | None  # the thread's ts (None in a DM)
    turn: str  # the message that started its turn
    audience: frozenset[str]  # the places whose text it carries
    args: dict[str, Any]  # its current revision's arguments (as the bot stores them)
    revision: int = 1
    last_editor: str | None = None
    votes: set[str] = field(default_factory=set)  # approvals of the current revision
    age_hours: int = 0  # escalation clock ticks since it was proposed
    card_rule: tuple[str, int] | None = None  # (rule, its epoch) the current card was made under
    card_approvers: tuple[str, ...] = ()  # who that rule named (ids and groups) then
    card_outcome: str = ""  # what the policy said when the current card was made
    proposal_id: int | None = None  # the bot's proposal, once seen
    outside: bool = False  # proposed after outside input (the read of #exec: a tool result)
    member: bool = False  # proposed after another full member's message in its thread

    @property
    def is_dm(self) -> bool:
        return self.channel.startswith("D")


@dataclass(frozen=True)
class Grant:
    rule: str | None  # None: made from a card that was not an ask of a rule (it covers nothing)
    epoch: int  # the rule's epoch when the card it was made from was made
    requester: str
    tool: str
    scope: str  # thread | channel | me
    channel: str
    thread: str | None
    turn: str
    is_dm: bool
    granter: str
    from_call: str


Refusal = tuple[str, str]  # (a short label of why, the whole sentence)


@dataclass(frozen=True)
class Judgement:
    allowed: bool
    decision: Decision
    why: tuple[str, ...] = ()  # when not allowed: each way it could have been allowed, refused
    votes: dict[str, Refusal | None] = field(default_factory=dict)  # voter -> why it fails
    grants: tuple[tuple[Grant, Refusal | None], ...] = ()
    counted: int = 0
    quorum: int = 1


@dataclass
class Reference:
    policy: Policy
    world: World = field(default_factory=World.initial)
    epochs: dict[str, int] = field(default_factory=dict)  # rule name -> times it changed
    grants: list[Grant] = field(default_factory=list)
    calls: dict[str, Call] = field(default_factory=dict)

    # -- changes --------------------------------------------------------------------------------
    def reload(self, policy: Policy) -> list[str]:
        """The policy in force changes; every rule whose definition changed starts a new epoch
        (its earlier cards and grants are of a rule that no longer is). Returns their names."""
        changed = []
        for name in {r.name for r in self.policy.rules} | {r.name for r in policy.rules}:
            if self.policy.rule(name) != policy.rule(name):
                self.epochs[name] = self.epochs.get(name, 0) + 1
                changed.append(name)
        self.policy = policy
        return sorted(changed)

    def decision(self, call: Call) -> Decision:
        if call.tool == RAISE:
            return decide_raise(self.policy, call.requester, call.channel, self.world)
        return decide(
            self.policy,
            call.tool,
            call.args,
            call.channel,
            call.requester,
            self.world,
            outside=call.outside,
        )

    def card_made(self, call: Call) -> None:
        """The call's card (its current revision) is made now: remember under which rule."""
        decided = self.decision(call)
        call.card_outcome = decided.outcome
        if decided.outcome == "ask" and decided.rule is not None:
            call.card_approvers = decided.rule.approvers  # else the card keeps its approvers
        if decided.outcome == "ask" and not decided.fail_closed and decided.rule is not None:
            call.card_rule = (decided.rule.name, self.epochs.get(decided.rule.name, 0))
        else:
            call.card_rule = None

    def edited(self, call: Call, by: str, args: dict[str, Any], revision: int) -> None:
        call.args, call.revision, call.last_editor = dict(args), revision, by
        call.votes = set()
        self.card_made(call)

    def grant_made(self, call: Call, scope: str, granter: str) -> Grant:
        rule, epoch = call.card_rule or (None, 0)
        grant = Grant(
            rule,
            epoch,
            call.requester,
            call.tool,
            scope,
            call.channel,
            call.thread,
            call.turn,
            call.is_dm,
            granter,
            call.key,
        )
        self.grants.append(grant)
        return grant

    # -- judgement ------------------------------------------------------------------------------
    def _due_added(self, rule: Rule, call: Call) -> set[str]:
        found: set[str] = set()
        for step in rule.escalate:
            if step.to and step.outcome is None and step.after_hours <= call.age_hours:
                found |= self.world.expand(step.to)
        return found

    def vote_refusal(self, voter: str, call: Call, decided: Decision) -> Refusal | None:
        """None if `voter`'s approval of the current revision counts now; else why not."""
        rule = decided.rule
        if rule is None:
            return ("nobody may approve", "no ask rule: nobody may approve")
        if not self.world.can_read(voter, call.audience):
            where = "+".join(sorted(call.audience))
            return ("cannot read the data", f"{voter} cannot read the data ({where})")
        four_eyes = rule.four_eyes or decided.fail_closed
        if four_eyes and voter == call.requester:
            return ("four-eyes: the requester", f"{voter} is the requester (four-eyes)")
        if four_eyes and voter == call.last_editor:
            return ("four-eyes: the last editor", f"{voter} made the last edit (four-eyes)")
        named = self.world.expand(rule.approvers) | self._due_added(rule, call)
        if voter in named:
            return None
        if not rule.approvers and not four_eyes and voter == call.requester:
            return None  # the requester decides alone
        if not rule.approvers and not four_eyes:
            return (
                "not the requester, who alone decides",
                f"{voter} is not the requester, who alone decides under {rule.name}",
            )
        return ("not an approver now", f"{voter} is not an approver under {rule.name} now")

    def _quorum(self, decided: Decision) -> int:
        rule = decided.rule
        return rule.approvals_required if rule is not None and rule.approvers else 1

    def grant_refusal(self, grant: Grant, call: Call, decided: Decision) -> Refusal | None:
        rule = decided.rule
        label = f"grant by {grant.granter} ({grant.scope}, from {grant.from_call})"
        if decided.fail_closed:
            return ("the decision is fail-closed", f"{label}: the decision is fail-closed")
        if decided.no_grants:
            return (
                "it followed outside input",
                f"{label}: the call was proposed after outside input, which no grant covers",
            )
        if grant.rule is None:
            return (
                "made from a card that was no rule's ask",
                f"{label}: made from a card that was not an ask of a rule (denied or fail-closed)",
            )
        if rule is None or grant.rule != rule.name:
            return (
                "made under another rule",
                f"{label}: made under {grant.rule}, the call is now decided by {_name(rule)}",
            )
        if grant.epoch != self.epochs.get(rule.name, 0):
            return ("its rule changed since", f"{label}: {rule.name} changed since its card")
        if rule.approvals_required != 1:
            return (
                "the quorum is above one",
                f"{label}: {rule.name} needs {rule.approvals_required} approvals",
            )
        if grant.requester != call.requester or grant.tool != call.tool:
            return (
                "another requester or tool",
                f"{label}: for {grant.requester}'s {grant.tool}",
            )
        if grant.scope == "thread":
            if grant.is_dm or call.is_dm:
                if grant.turn != call.turn:
                    return ("a DM thread outside its turn", f"{label}: another turn of a DM")
            elif (grant.channel, grant.thread) != (call.channel, call.thread):
                return ("another thread", f"{label}: another thread")
        if grant.scope == "channel" and grant.channel != call.channel:
            return ("another channel", f"{label}: another channel")
        refused = self.vote_refusal(grant.granter, call, decided)
        if refused:
            return (f"the granter: {refused[0]}", f"{label}: {refused[1]}")
        return None

    def judge(self, call: Call) -> Judgement:
        """May `call`, with its current arguments, start to run now?"""
        decided = self.decision(call)
        if decided.outcome == "deny":
            return Judgement(False, decided, (f"denied by {_name(decided.rule)}",))
        if decided.outcome == "allow":
            return Judgement(True, decided)
        votes = {voter: self.vote_refusal(voter, call, decided) for voter in sorted(call.votes)}
        counted = [voter for voter, refused in votes.items() if refused is None]
        quorum = self._quorum(decided)
        if decided.rule is not None and len(counted) >= quorum:
            return Judgement(True, decided)
        grants = [(g, self.grant_refusal(g, call, decided)) for g in self.grants]
        if any(refused is None for _, refused in grants):
            return Judgement(True, decided)
        escalation = None
        rule = decided.rule
        if rule is not None and not decided.fail_closed:
            for step in rule.escalate:
                if step.outcome == "allow" and decided.no_grants:
                    continue  # after outside input no allow stands, the ladder's included
                if step.outcome == "allow":
                    if step.after_hours <= call.age_hours:
                        return Judgement(True, decided)
                    escalation = f"escalation allow after {step.after_hours}h not due"
                if step.outcome is not None:
                    break  # nothing follows a terminal step
        why = [f"{len(counted)} valid approval(s) {counted} of {quorum} needed"]
        why += [f"vote of {refused[1]}" for refused in votes.values() if refused]
        why += [refused[1] for _, refused in grants if refused]
        why += [escalation] if escalation else []
        return Judgement(False, decided, tuple(why), votes, tuple(grants), len(counted), quorum)

    def fields_differ(self, call: Call, row: dict[str, Any], before: dict[str, Any] | None) -> str:
        """'' if the row written holds exactly the current revision's arguments; else how not."""
        wrong = []
        if call.tool == "create_task":
            for name in ("title", "description", "assignee", "priority", "due_date"):
                want = call.args.get(name)
                if name == "description":
                    want = want or ""
                if row.get(name) != want:
                    wrong.append(f"{name}={row.get(name)!r} (revision {call.revision}: {want!r})")
        else:
            for name in ("title", "description", "assignee", "priority", "due_date", "status"):
                want = call.args.get(name)
                expected = (before or {}).get(name) if want is None else want
                if row.get(name) != expected:
                    wrong.append(f"{name}={row.get(name)!r} (expected {expected!r})")
        return "; ".join(wrong)


def _name(rule: Rule | None) -> str:
    return rule.name if rule is not None else "the default"
