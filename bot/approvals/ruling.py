"""The answer of the one door (`bot.policy.one_door`): may this exact revision of a write run
now, and who may decide it. The approvals layer holds the answer's shape and asks the question
through `Authorise` (the door itself lives above it, with the policy), so every step that can
lead to a write (proposal, Edit, each click, a grant's cover, an escalation step, a Retry and
the start of execution) reads one answer made one way."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

from bot.approvals.errors import ApprovalError
from bot.provenance import Source

Outcome = Literal["deny", "allow", "grant", "ask"]


class Step(enum.StrEnum):
    """Where the question is asked (recorded with each decision)."""

    PROPOSE = "propose"
    EDIT = "edit"
    VOTE = "vote"  # Approve, and the grant buttons
    DECIDE = "decide"  # Decline, Ask for changes: who may decide, nothing runs
    ESCALATE = "escalate"
    RETRY = "retry"
    EXECUTE = "execute"
    RELOAD = "reload"  # a new policy version met a waiting proposal
    LIST = "list"  # whose list of waiting approvals shows it (cached groups and reach)


@dataclass(frozen=True)
class Question:
    """One exact revision of a call, and who is involved."""

    team_id: str
    tool: str
    pack: str
    arguments: dict[str, Any]
    channel: str
    thread_ts: str | None
    requester: str
    audience: str | None
    revision: int = 1
    revised_by: str | None = None
    proposal_id: int | None = None
    definition: str | None = None  # the tool's definition hash, which grants are bound to
    turn: str | None = None  # a DM's conversation turn ("turn:ID"), where a thread grant ends
    counts: tuple[int, int] = (0, 0)  # calls of the tool in the thread, and today
    created_at: datetime | None = None  # when the proposal was made (the ladder counts from it)
    recorded: dict[str, Any] | None = None  # the proposal's recorded ruling (escalated_to, …)
    # What the turn had read before proposing the call, newest last (`bot.provenance`): the
    # policy's facts `untrusted` and `sources`, the same at every step of the proposal.
    sources: tuple[Source, ...] = ()

    @property
    def untrusted(self) -> bool:
        return any(s.untrusted for s in self.sources)


@dataclass(frozen=True)
class Ruling:
    outcome: Outcome
    version: str  # the policy version in force
    rule: str | None
    reason: str | None = None  # deny: why; a fail-closed ask: what could not be evaluated
    record: dict[str, Any] = field(default_factory=dict)  # what the proposal keeps of it
    grant_id: int | None = None  # outcome "grant": the grant that covers the call
    failed_closed: bool = False
    refusal: str | None = None  # the actor's step: why they may not decide (None: they may)
    valid_votes: tuple[str, ...] = ()  # votes on the revision that count under this ruling
    # A refusal because Slack could not answer (user groups unreadable): nothing may run or
    # be approved now, but nothing waiting is closed or rerouted for it either.
    transient: bool = False

    def reroutes(self, recorded: dict[str, Any] | None) -> bool:
        """Whether a waiting proposal recorded under `recorded` must follow this ruling to
        other deciders."""
        return self.outcome == "ask" and not self.transient and not self.same_deciders(recorded)

    def closes(self) -> bool:
        """Whether a waiting proposal must be closed for it (a deny Slack did not cause)."""
        return self.outcome == "deny" and not self.transient

    @property
    def approvers(self) -> tuple[str, ...]:
        return tuple(self.record.get("approvers") or ())

    @property
    def approvals_required(self) -> int:
        return int(self.record.get("approvals_required") or 1)

    @property
    def four_eyes(self) -> bool:
        return bool(self.record.get("four_eyes"))

    def runs(self) -> bool:
        """Whether the revision may run now, with the votes it was asked about."""
        if self.outcome in ("allow", "grant"):
            return True
        if self.outcome == "deny":
            return False
        unclicked = [v for v in self.valid_votes if ":" in v or v == "escalation"]
        people = [v for v in self.valid_votes if v not in unclicked]
        return bool(unclicked) or len(people) >= self.approvals_required

    def same_deciders(self, recorded: dict[str, Any] | None) -> bool:
        """Whether the proposal's recorded ruling names the same rule and requirements (else
        its card must be routed again)."""
        kept = recorded or {}
        keys = ("rule", "rule_hash", "approvers", "approvals_required", "four_eyes", "route")
        return all(kept.get(k) == self.record.get(k) for k in keys)


class Authorise(Protocol):
    """The one door, as the approvals layer calls it."""

    def version_in_force(self) -> str:
        """The policy version a ruling made now would be made under."""
        ...

    async def __call__(
        self,
        question: Question,
        step: Step,
        *,
        actor: str | None = None,
        votes: Sequence[str] = (),
    ) -> Ruling: ...


class Refused(ApprovalError):
    """The door said no at a step that would have led to a write."""

    def __init__(self, ruling: Ruling, message: str) -> None:
        super().__init__(message)
        self.ruling = ruling
